"""Viewsets and serializers of the DRF tests.

Rows live in the database the test's ``alias`` names (``DATABASE``, set by
the conftest), so every test runs on SQLite and on PostgreSQL. ``HOOK``
runs inside the open block before the event is sent: tests race commits,
nest requests or raise errors there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import authentication, mixins, permissions, serializers, viewsets

from django_xsm.contrib.drf import StatechartEventsMixin, StatechartSerializerField
from tests.fieldapp.models import Order, Parcel, Shipment, SlugOrder, Ticket

DATABASE = {"alias": "default"}
#: ``HOOK["before_send"](view, block, row, event)``, when set.
HOOK: dict[str, Callable[..., Any]] = {}
#: How many times perform_event ran (a conflict runs it again).
CALLS: dict[str, int] = {"perform_event": 0}


class OrderSerializer(serializers.ModelSerializer):
    status = StatechartSerializerField()
    status_value = StatechartSerializerField(source="status", full_value=True)
    status_events = StatechartSerializerField(source="status", with_events=True)

    class Meta:
        model = Order
        fields = ["id", "total", "status", "status_value", "status_events", "status_version"]


class PlainOrderSerializer(serializers.ModelSerializer):
    """No declared fields: the StatechartField maps to a read-only string."""

    class Meta:
        model = Order
        fields = "__all__"


class ParcelSerializer(serializers.ModelSerializer):
    state = StatechartSerializerField(full_value=True)
    state_events = StatechartSerializerField(source="state", with_events=True, full_value=True)

    class Meta:
        model = Parcel
        fields = ["id", "state", "state_events"]


class OrderViewSet(StatechartEventsMixin, viewsets.ModelViewSet):
    serializer_class = OrderSerializer

    def get_queryset(self) -> Any:
        return Order.objects.using(DATABASE["alias"]).order_by("pk")

    def perform_event(self, block: Any, row: Any, event: dict[str, Any]) -> Any:
        CALLS["perform_event"] += 1
        hook = HOOK.get("before_send")
        if hook is not None:
            hook(self, block, row, event)
        return super().perform_event(block, row, event)


class OptionalKeyOrderViewSet(OrderViewSet):
    statechart_idempotent = False


class NoRetryOrderViewSet(OrderViewSet):
    statechart_retries = 0


class LockedOrderViewSet(OrderViewSet):
    statechart_lock = "pessimistic"


class MembersOrderViewSet(OrderViewSet):
    authentication_classes = [authentication.BasicAuthentication]  # answers 401 + a challenge
    permission_classes = [permissions.IsAuthenticated]


class StaffOnlyRows(permissions.BasePermission):
    """An object permission: only staff users may see a row."""

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        return bool(request.user and request.user.is_staff)


class StaffOrderViewSet(OrderViewSet):
    """Rows only staff may see (the detail view and the history alike), in
    pages of at most 2 records."""

    permission_classes = [StaffOnlyRows]
    statechart_history_page_size = 2
    statechart_history_max_page_size = 2


class SlugOrderSerializer(serializers.ModelSerializer):
    status = StatechartSerializerField()
    status_value = StatechartSerializerField(source="status", full_value=True)
    status_events = StatechartSerializerField(source="status", with_events=True)

    class Meta:
        model = SlugOrder
        fields = ["slug", "status", "status_value", "status_events"]


class SlugOrderViewSet(StatechartEventsMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Keys from a string primary key: "slug-order:{slug}" (a slug the
    database holds may make no usable key: the list still answers)."""

    lookup_field = "slug"
    serializer_class = SlugOrderSerializer

    def get_queryset(self) -> Any:
        return SlugOrder.objects.using(DATABASE["alias"])


class ParcelViewSet(StatechartEventsMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """A GenericViewSet: only retrieve and the events endpoint."""

    serializer_class = ParcelSerializer

    def get_queryset(self) -> Any:
        return Parcel.objects.using(DATABASE["alias"])


class ShipmentSerializer(serializers.ModelSerializer):
    class Meta:
        model = Shipment
        fields = ["id", "payment", "delivery"]


class DeliveryViewSet(StatechartEventsMixin, viewsets.ReadOnlyModelViewSet):
    """Shipment has two StatechartFields: this endpoint sends to one."""

    statechart_field = "delivery"
    serializer_class = ShipmentSerializer

    def get_queryset(self) -> Any:
        return Shipment.objects.using(DATABASE["alias"])


class TicketSerializer(serializers.ModelSerializer):
    """docs/drf.md's serializer, on a model whose initial state arms a timer."""

    status = StatechartSerializerField()
    status_value = StatechartSerializerField(source="status", full_value=True)
    status_events = StatechartSerializerField(source="status", with_events=True)

    class Meta:
        model = Ticket
        fields = ["id", "title", "status", "status_value", "status_events", "status_version"]


class TicketViewSet(StatechartEventsMixin, viewsets.ModelViewSet):
    serializer_class = TicketSerializer

    def get_queryset(self) -> Any:
        return Ticket.objects.using(DATABASE["alias"]).order_by("pk")
