"""The order-fulfilment chart (``order.json``) and the Python it names.

cart → awaiting_payment → paid → shipped, with CANCEL from the cart or
while awaiting payment, and a durable ``after`` timer that cancels an order
left unpaid for ``settings.ORDERS_PAYMENT_TIMEOUT_MS``. Registered in
``XSM["MACHINES"]`` as ``"order": "testproject.orders.machines.order"``.

Actions only change the context: anything with an outside effect (e-mails,
warehouse calls) belongs in a ``post_transition`` receiver, which runs once
the transition is durably stored (see ``receivers.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings

from django_xsm.engine import MachineLogic, create_machine

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


def has_items(context: dict[str, Any], event: Any) -> bool:
    return bool(context["items"])


def pays_total(context: dict[str, Any], event: Any) -> bool:
    return bool(event.get("amount_cents") == context["total_cents"])


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
    },
    guards={"hasItems": has_items, "paysTotal": pays_total},
    delays={"PAYMENT_TIMEOUT": payment_timeout_ms},
)

order = create_machine(CONFIG, logic=logic)
