"""The order-fulfilment chart (``order.json``) and the Python it names.

cart → awaiting_payment → paid → shipped, with CANCEL from the cart or
while awaiting payment, and a durable ``after`` timer that cancels an order
left unpaid for ``settings.ORDERS_PAYMENT_TIMEOUT_MS``. Registered in
``XSM["MACHINES"]`` as ``"order": "testproject.orders.machines.order"``.

Actions only change the context. Effects on the outside world are emitted
(``xstate.emit`` in the chart) and delivered by the outbox worker to the
handlers of ``effects.py``: ``order.paid`` (sends a receipt) and
``order.shipped`` (calls the warehouse). An order shipped via the flaky
warehouse waits in ``shipping`` for it to confirm; when that delivery runs
out of attempts the worker sends ``xsm.outbox.failed`` and the order moves
to ``shipping_failed`` (compensating), where ``SWITCH_WAREHOUSE`` assigns
the main warehouse so that a redrive of the dead letter can succeed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from django_xsm.engine import MachineLogic, create_machine

MAIN_WAREHOUSE = "main"
#: The warehouse whose API fails every call (effects.ship_to_warehouse).
FLAKY_WAREHOUSE = "flaky"
WAREHOUSES = (MAIN_WAREHOUSE, FLAKY_WAREHOUSE)

CONFIG: dict[str, Any] = json.loads((Path(__file__).parent / "order.json").read_text())


def add_item(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["items"].append(
        {"sku": event["sku"], "qty": event["qty"], "price_cents": event["price_cents"]}
    )
    context["total_cents"] += event["qty"] * event["price_cents"]


def record_payment(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["payment"] = {"id": event["payment_id"], "amount_cents": event["amount_cents"]}


def record_cancel(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["cancel_reason"] = event.get("reason") or "cancelled by customer"


def expire(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["cancel_reason"] = "payment timeout"


def record_shipment(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["tracking"] = event.get("tracking") or ""
    context["warehouse"] = event.get("warehouse") or MAIN_WAREHOUSE


def record_shipping_failure(
    instance: Any, context: dict[str, Any], event: Any, action: Any
) -> None:
    # event: {"type": "xsm.outbox.failed", "event", "error", "attempts", "delivery_id"},
    # sent once per delivery id (a redrive that fails again is not told twice)
    context["shipping_error"] = str(event.get("error") or "")[:500]
    context["shipping_attempts"] = event.get("attempts")


def switch_warehouse(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["warehouse"] = MAIN_WAREHOUSE


def has_items(context: dict[str, Any], event: Any) -> bool:
    return bool(context["items"])


def pays_total(context: dict[str, Any], event: Any) -> bool:
    return bool(event.get("amount_cents") == context["total_cents"])


def via_flaky_warehouse(context: dict[str, Any], event: Any) -> bool:
    return bool(event.get("warehouse") == FLAKY_WAREHOUSE)


def shipment_failed(context: dict[str, Any], event: Any) -> bool:
    """The dead-lettered delivery was the shipment (not, say, a receipt)."""
    failed = event.get("event")
    return isinstance(failed, Mapping) and failed.get("type") == "order.shipped"


def payment_timeout_ms(context: dict[str, Any], event: Any) -> int:
    # Read when the state is entered, so tests (and operators) can change it.
    return int(getattr(settings, "ORDERS_PAYMENT_TIMEOUT_MS", 15 * 60 * 1000))


logic = MachineLogic(
    actions={
        "addItem": add_item,
        "recordPayment": record_payment,
        "recordCancel": record_cancel,
        "expire": expire,
        "recordShipment": record_shipment,
        "recordShippingFailure": record_shipping_failure,
        "switchWarehouse": switch_warehouse,
    },
    guards={
        "hasItems": has_items,
        "paysTotal": pays_total,
        "viaFlakyWarehouse": via_flaky_warehouse,
        "shipmentFailed": shipment_failed,
    },
    delays={"PAYMENT_TIMEOUT": payment_timeout_ms},
)

order = create_machine(CONFIG, logic=logic)
