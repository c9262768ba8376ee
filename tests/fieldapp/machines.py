"""Charts of the model-field tests.

``shop_order``: cart -> paid -> shipped (-> refunded), ADD counts items,
PAY is guarded by the payload's amount (so it is *conditional* without
one), REFUND needs a permission (``PERMISSIONS`` in the settings), and the
outbox's compensation ``xsm.outbox.failed`` runs ``compensate`` (which a
client must never reach: ``COMPENSATIONS`` records every run).
``parcel``: a compound state and a parallel one, for the projection.
"""

from __future__ import annotations

from typing import Any

from django_xsm.engine import MachineLogic, create_machine

SHOP_ORDER: dict[str, Any] = {
    "id": "shop",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {
            "on": {
                "ADD": {"actions": "add"},
                "PAY": {"target": "paid", "guard": "paysEnough"},
                "PAY_ANYWAY": "paid",
                "xsm.outbox.failed": {"actions": "compensate"},
            }
        },
        "paid": {"on": {"SHIP": "shipped", "REFUND": "refunded"}},
        "shipped": {"type": "final"},
        "refunded": {"type": "final"},
    },
}


def _add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["items"] += int(event.get("n", 1))


def _pays_enough(ctx: dict[str, Any], event: Any) -> bool:
    return int(event["amount"]) >= 10


#: The delivery ids the shop's compensation ran for.
COMPENSATIONS: list[str] = []


def _compensate(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    COMPENSATIONS.append(str(event.get("delivery_id", "")))


shop_logic = MachineLogic(
    actions={"add": _add, "compensate": _compensate}, guards={"paysEnough": _pays_enough}
)
shop_order = create_machine(SHOP_ORDER, logic=shop_logic)

PARCEL: dict[str, Any] = {
    "id": "parcel",
    "initial": "packing",
    "states": {
        "packing": {"on": {"PACKED": "shipping"}},
        "shipping": {
            "initial": "picked",
            "states": {"picked": {"on": {"LOADED": "loaded"}}, "loaded": {}},
            "on": {"SPLIT": "tracking"},
        },
        "tracking": {
            "type": "parallel",
            "states": {
                "road": {"initial": "moving", "states": {"moving": {}, "stopped": {}}},
                "customs": {"initial": "pending", "states": {"pending": {}, "cleared": {}}},
            },
        },
    },
}

parcel = create_machine(PARCEL)

#: How many times the signup chart's entry action ran (reads must not run it).
WELCOMES: list[str] = []

SIGNUP: dict[str, Any] = {
    "id": "signup",
    "initial": "welcome",
    "states": {"welcome": {"entry": "sendWelcome", "on": {"DONE": "active"}}, "active": {}},
}


def _send_welcome(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    WELCOMES.append("sent")


signup = create_machine(SIGNUP, logic=MachineLogic(actions={"sendWelcome": _send_welcome}))

#: SHOP_ORDER with "paid" renamed "settled", same version: a deploy that
#: forgot the version bump (rows whose instance exists cannot be loaded).
SHOP_ORDER_RENAMED: dict[str, Any] = {
    **SHOP_ORDER,
    "states": {
        "cart": {
            "on": {
                "ADD": {"actions": "add"},
                "PAY": {"target": "settled", "guard": "paysEnough"},
                "PAY_ANYWAY": "settled",
            }
        },
        "settled": SHOP_ORDER["states"]["paid"],
        "shipped": {"type": "final"},
        "refunded": {"type": "final"},
    },
}
