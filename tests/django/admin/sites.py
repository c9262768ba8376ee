"""A test-only admin site with ModelAdmins of the model-field test app
that use ``StatechartAdminMixin`` (mounted at ``/shop-admin/`` by
``tests/django/admin/urls.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin

from django_xsm.admin import StatechartAdminMixin
from tests.fieldapp.models import Order, Parcel, Shipment, Ticket

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:
    _ModelAdmin = admin.ModelAdmin

shop_site = admin.AdminSite(name="shopadmin")


@admin.register(Order, site=shop_site)
class OrderAdmin(StatechartAdminMixin, _ModelAdmin):
    list_display = ["id", "total", "status"]


@admin.register(Parcel, site=shop_site)
class ParcelAdmin(StatechartAdminMixin, _ModelAdmin):
    """Lists nothing itself: the mixin adds the state column and filter."""


@admin.register(Shipment, site=shop_site)
class ShipmentAdmin(StatechartAdminMixin, _ModelAdmin):
    list_display = ["id"]
    list_filter = ["delivery"]  # a plain name: the mixin puts its state filter there


@admin.register(Ticket, site=shop_site)
class TicketAdmin(StatechartAdminMixin, _ModelAdmin):
    """An add form (title only): the new row's instance is created on commit."""

    fields = ["title"]
