"""The demo's order: a real row whose ``status`` is its statechart.

The row holds what the shop queries (its id, when it was created, its
state column and version); the statechart in Redis holds the rest (items,
totals, payment) and every guarantee of the persisted block. The list page
reads rows with the ORM (``Order.objects.filter(status="paid")``).
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
