"""Machines that emit, for the outbox tests.

``shipment`` emits ``order.paid`` from its chart (statically, so the system
check sees it) and ``note.<kind>`` from a Python action (dynamically: only
the worker sees it). Once paid, an ``xsm.outbox.failed`` takes it to
``compensating``, where every further one is counted: a compensation
applied twice would show as ``failures == 2``. ``mute`` emits ``mute.ping``
and has no transition for ``xsm.outbox.failed``: it refuses compensations.
"""

from __future__ import annotations

from typing import Any

from django_xsm.engine import MachineLogic, create_machine

SHIPMENT: dict[str, Any] = {
    "id": "shipment",
    "initial": "new",
    "context": {"failures": 0, "failed": None},
    "states": {
        "new": {
            "on": {
                "PAY": {
                    "target": "paid",
                    "actions": [
                        {
                            "type": "xstate.emit",
                            "event": {"type": "order.paid", "amount": 7, "card_number": "4111"},
                        }
                    ],
                },
                "NOTE": {"actions": "note"},
            }
        },
        "paid": {
            "on": {
                "xsm.outbox.failed": {"target": "compensating", "actions": "remember"},
                "SHIP": {
                    "target": "shipped",
                    "actions": {"type": "xstate.emit", "event": "order.shipped"},
                },
            }
        },
        "compensating": {"on": {"xsm.outbox.failed": {"actions": "remember"}}},
        "shipped": {},
    },
}

MUTE: dict[str, Any] = {
    "id": "mute",
    "initial": "idle",
    "states": {
        "idle": {
            "on": {"PING": {"actions": {"type": "xstate.emit", "event": {"type": "mute.ping"}}}}
        }
    },
}


def note(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    emitted = {"type": f"note.{event.get('kind', 'plain')}", "text": event.get("text", "")}
    if event.get("request_id"):
        emitted["request_id"] = event.get("request_id")
    instance.emit(emitted)


def remember(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["failures"] += 1
    context["failed"] = {
        "delivery_id": event.get("delivery_id"),
        "attempts": event.get("attempts"),
        "error": event.get("error"),
        "event_type": event.get("event", {}).get("type"),
    }


shipment = create_machine(
    SHIPMENT, logic=MachineLogic(actions={"note": note, "remember": remember})
)
mute = create_machine(MUTE)

MACHINES = {
    "shipment": "tests.django.outbox.machines.shipment",
    "mute": "tests.django.outbox.machines.mute",
}
