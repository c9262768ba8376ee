"""An outbox handler of the testing toolkit's tests: ``order.paid`` ships
the shipment that emitted it, whose SHIP emits ``order.shipped`` — an event
emitted and delivered within one ``xsm.deliver()``."""

from __future__ import annotations

from typing import Any

from django_xsm.outbox import Delivery
from django_xsm.registry import machines

SHIPPED: list[str] = []


def ship_it(event: dict[str, Any], *, delivery: Delivery) -> None:
    machines["shipment"].objects.send(
        delivery.key, "SHIP", idempotency_key=f"ship:{delivery.delivery_id}"
    )
    SHIPPED.append(delivery.key)
