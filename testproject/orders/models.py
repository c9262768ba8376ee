"""The demo's order: a real row whose ``status`` is its statechart.

The row holds what the shop queries (its id, when it was created, its
state column and version); the statechart in Redis holds the rest (items,
totals, payment) and every guarantee of the persisted block. The list page
reads rows with the ORM (``Order.objects.filter(status="paid")``).

A :class:`Receipt` is what the outbox handler of ``order.paid`` "sent"
(``effects.send_receipt``): one row per delivery id, so a redelivery of
the same event finds its receipt instead of sending a second one.
"""

from __future__ import annotations

from django.db import models

from django_xsm.fields import StatechartField


class Order(models.Model):
    # Hex ids (the API derives a new order's id from its Idempotency-Key),
    # so the instance key is "order:<id>" as before.
    id = models.CharField(primary_key=True, max_length=32)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    status = StatechartField(machine="order")

    class Meta:
        ordering = ["-created_at"]
        permissions = [("ship_order", "Can ship an order")]

    def __str__(self) -> str:
        return f"Order {self.pk}"


class Receipt(models.Model):
    """A receipt the shop "sent" for an emitted event (the demo's e-mail)."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="receipts")
    # The outbox's delivery id: stable across retries and redrives, so it is
    # the idempotency key of the send (unique: a redelivery adds no row).
    delivery_id = models.CharField(max_length=100, unique=True)
    event_type = models.CharField(max_length=100)
    amount_cents = models.IntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "pk"]

    def __str__(self) -> str:
        return f"Receipt {self.delivery_id} for order {self.order_id}"
