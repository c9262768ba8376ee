"""Charts of the model-field tests.

``shop_order``: cart -> paid -> shipped (-> refunded), ADD counts items,
PAY is guarded by the payload's amount (so it is *conditional* without
one), REFUND needs a permission (``PERMISSIONS`` in the settings), and the
outbox's compensation ``xsm.outbox.failed`` runs ``compensate`` (which a
client must never reach: ``COMPENSATIONS`` records every run).
``parcel``: a compound state and a parallel one, for the projection.
``desk``: a ticket whose initial state arms a timer and emits an event.
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


#: A help-desk ticket: its initial state arms a 5 s timer and emits
#: "desk.opened" on entry (counted in the context, so a second initial
#: entry would show); NOTE stays in "open", keeping the timer.
DESK: dict[str, Any] = {
    "id": "desk",
    "initial": "open",
    "context": {"opened": 0, "notes": 0},
    "states": {
        "open": {
            "entry": ["countOpen", {"type": "xstate.emit", "event": {"type": "desk.opened"}}],
            "after": {"5000": "escalated"},
            "on": {"ASSIGN": "assigned", "NOTE": {"actions": "note"}},
        },
        "assigned": {"on": {"CLOSE": "closed"}},
        "escalated": {
            "entry": {"type": "xstate.emit", "event": {"type": "desk.escalated"}},
            "on": {"ASSIGN": "assigned"},
        },
        "closed": {"type": "final"},
    },
}


#: While it holds a message, the desk's entry action raises it (a bug in a chart's code).
DESK_ENTRY_FAILS: list[str] = []


def _count_open(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    if DESK_ENTRY_FAILS:
        raise RuntimeError(DESK_ENTRY_FAILS[0])
    ctx["opened"] += 1


def _note(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["notes"] += 1


desk = create_machine(DESK, logic=MachineLogic(actions={"countOpen": _count_open, "note": _note}))


def desk_effect(event: Any, *, delivery: Any) -> None:
    """The outbox handler of the desk's emitted events (tests read the queue)."""
