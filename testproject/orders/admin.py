"""The demo's orders in the Django admin: the state column and filter, the
diagram, the transition log and event buttons (StatechartAdminMixin)."""

from __future__ import annotations

from django.contrib import admin

from django_xsm.admin import StatechartAdminMixin

from .models import Order


@admin.register(Order)
class OrderAdmin(StatechartAdminMixin, admin.ModelAdmin):
    list_display = ["id", "status", "status_version", "created_at"]
    date_hierarchy = "created_at"
    search_fields = ["id"]
