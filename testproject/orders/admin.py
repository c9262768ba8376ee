"""The demo's orders in the Django admin: the state column and filter, the
diagram, the transition log and event buttons (StatechartAdminMixin); and
the receipts the outbox handler of ``order.paid`` wrote (read-only)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from django_xsm.admin import StatechartAdminMixin

from .models import Order, Receipt


@admin.register(Order)
class OrderAdmin(StatechartAdminMixin, admin.ModelAdmin):
    list_display = ["id", "status", "status_version", "created_at"]
    date_hierarchy = "created_at"
    search_fields = ["id"]


@admin.register(Receipt)
class ReceiptAdmin(admin.ModelAdmin):
    """Receipts are written by the outbox worker only."""

    list_display = ["delivery_id", "order", "event_type", "amount_cents", "created"]
    list_filter = ["event_type"]
    search_fields = ["delivery_id", "order__id"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
