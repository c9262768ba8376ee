"""The demo's outbox handlers: what the order's emitted events do outside.

The order chart emits ``order.paid`` and ``order.shipped``
(``xstate.emit``); the COMMIT that stores the transition stores the event
in the outbox, and ``manage.py xsm_run_outbox`` (in the demo server: a
thread, see ``apps.py``) calls the handler ``XSM["OUTBOX"]["HANDLERS"]``
names for it, as ``handler(event, *, delivery=Delivery(...))``.

Delivery is at least once: a handler may run again for the same event (a
retry after a failure, a worker that died, an operator's redrive), always
with the same ``delivery.delivery_id``, so each handler uses it as its
idempotency key:

* :func:`send_receipt` writes one :class:`~.models.Receipt` per delivery
  id (the demo's "e-mail"), never two;
* :func:`ship_to_warehouse` calls the warehouse the order was shipped
  from. The main warehouse accepts every parcel; the *flaky* one refuses
  every call (:class:`WarehouseUnavailable`), so its delivery is retried
  ``MAX_ATTEMPTS`` times, dead-lettered, and the order receives
  ``xsm.outbox.failed`` (-> ``shipping_failed``). Once the order is
  switched to the main warehouse (``SWITCH_WAREHOUSE``), a redrive of the
  dead letter succeeds and confirms the shipment.
"""

from __future__ import annotations

import logging
from typing import Any

from django_xsm.outbox import Delivery
from django_xsm.registry import machines

from .machines import FLAKY_WAREHOUSE
from .models import Order, Receipt

logger = logging.getLogger("testproject.orders")

#: The states in which an order waits for the warehouse to confirm.
AWAITING_WAREHOUSE = ("shipping", "shipping_failed")


class WarehouseUnavailable(Exception):
    """The flaky warehouse's API refused the call (it always does)."""


def order_id_of(key: str) -> str:
    return key.split(":", 1)[1]


def send_receipt(event: dict[str, Any], *, delivery: Delivery) -> None:
    """``order.paid``: "e-mail" a receipt, once per delivery id."""
    order = Order.objects.get(pk=order_id_of(delivery.key))  # DoesNotExist: retried
    payment = machines["order"].objects.get(delivery.key).context.get("payment") or {}
    # get_or_create on the unique delivery id: a redelivery (or two workers
    # racing on a reclaimed lease) finds the first receipt.
    _receipt, created = Receipt.objects.get_or_create(
        delivery_id=delivery.delivery_id,
        defaults={
            "order": order,
            "event_type": str(event.get("type", "")),
            "amount_cents": int(payment.get("amount_cents") or 0),
        },
    )
    if created:
        logger.info("receipt sent for %s (delivery %s)", delivery.key, delivery.delivery_id)
    else:
        logger.info("receipt for delivery %s was already sent", delivery.delivery_id)


def ship_to_warehouse(event: dict[str, Any], *, delivery: Delivery) -> None:
    """``order.shipped``: hand the parcel to the order's warehouse now.

    The warehouse is read from the order as it is *now*, not as it was when
    the event was emitted, so switching an order to the main warehouse and
    redriving its dead letter ships it from there.
    """
    objects = machines["order"].objects
    order = objects.get(delivery.key)
    if order.context.get("warehouse") == FLAKY_WAREHOUSE:
        raise WarehouseUnavailable(
            f"flaky warehouse: 503 Service Unavailable (attempt {delivery.attempt})"
        )
    logger.info("warehouse accepted %s (delivery %s)", delivery.key, delivery.delivery_id)
    if order.value in AWAITING_WAREHOUSE:
        # The idempotency key makes a second delivery of this event a replay.
        objects.send(
            delivery.key,
            "WAREHOUSE_CONFIRMED",
            actor="warehouse",
            idempotency_key=f"warehouse:{delivery.delivery_id}",
            principal="warehouse",
            reason=f"outbox delivery {delivery.delivery_id}",
        )
