"""Charts the diagram tests draw: one per feature a renderer must show."""

from __future__ import annotations

from typing import Any

from django_xsm.engine import MachineLogic, create_machine

#: Compound states, an initial child inside a compound, guards, an
#: ``after``, an ``always``, ``onDone``, a targetless and a self transition.
COMPOUND: dict[str, Any] = {
    "id": "store",
    "initial": "cart",
    "states": {
        "cart": {
            "on": {
                "ADD": {"actions": "add"},
                "CHECKOUT": {"target": "checkout", "guard": "hasItems"},
                "CANCEL": "cancelled",
            }
        },
        "checkout": {
            "initial": "address",
            "states": {
                "address": {"on": {"NEXT": "payment", "BACK": "#store.cart"}},
                "payment": {
                    "on": {"PAY": {"target": "done", "guard": "paysTotal"}, "RETRY": "payment"},
                    "after": {"60000": "#store.cancelled"},
                },
                "done": {"type": "final"},
            },
            "onDone": "paid",
        },
        "paid": {
            "initial": "packing",
            "states": {
                "packing": {
                    "always": {"target": "ready", "guard": "inStock"},
                    "on": {"PACKED": "ready"},
                },
                "ready": {},
            },
            "on": {"SHIP": "shipped", "REFUND": "refunded"},
        },
        "shipped": {"type": "final"},
        "refunded": {"type": "final"},
        "cancelled": {"type": "final"},
    },
}

#: Two regions side by side, each with its own initial state.
PARALLEL: dict[str, Any] = {
    "id": "editor",
    "initial": "editing",
    "states": {
        "editing": {
            "type": "parallel",
            "states": {
                "bold": {
                    "initial": "off",
                    "states": {
                        "off": {"on": {"TOGGLE_BOLD": "on"}},
                        "on": {"on": {"TOGGLE_BOLD": "off"}},
                    },
                },
                "list": {
                    "initial": "none",
                    "states": {
                        "none": {"on": {"BULLETS": "bullets", "NUMBERS": "numbers"}},
                        "bullets": {"on": {"NONE": "none"}},
                        "numbers": {"on": {"NONE": "none"}},
                    },
                },
            },
            "on": {"SAVE": "saved"},
        },
        "saved": {"type": "final"},
    },
}

#: Shallow and deep history: leave ``player`` and come back where it was.
HISTORY: dict[str, Any] = {
    "id": "player",
    "initial": "on",
    "states": {
        "on": {
            "initial": "playing",
            "states": {
                "playing": {
                    "initial": "normal",
                    "states": {
                        "normal": {"on": {"FAST": "fast"}},
                        "fast": {"on": {"SLOW": "normal"}},
                    },
                    "on": {"PAUSE": "paused"},
                },
                "paused": {"on": {"PLAY": "playing"}},
                "hist": {"type": "history", "history": "deep"},
                "shallow": {"type": "history"},
            },
            "on": {"POWER": "off"},
        },
        "off": {"on": {"POWER": "on.hist", "RESET": "on.shallow"}},
    },
}


#: The chart a new user drew: a guarded event from two states, a timer,
#: a final state reached from three.
TICKET: dict[str, Any] = {
    "id": "ticket",
    "initial": "open",
    "states": {
        "open": {
            "on": {
                "ASSIGN": {"target": "assigned", "guard": "hasAssignee"},
                "CLOSE": "closed",
            },
            "after": {"5000": "escalated"},
        },
        "escalated": {
            "on": {"ASSIGN": {"target": "assigned", "guard": "hasAssignee"}, "CLOSE": "closed"}
        },
        "assigned": {"on": {"RESOLVE": "resolved", "UNASSIGN": "open", "CLOSE": "closed"}},
        "resolved": {"on": {"REOPEN": "open", "ARCHIVE": "closed"}},
        "closed": {"type": "final"},
    },
}

#: Self-loops and targetless transitions, several on one state, on a leaf
#: inside a compound state and on the compound state itself.
LOOPS: dict[str, Any] = {
    "id": "counter",
    "initial": "idle",
    "states": {
        "idle": {
            "on": {
                "TICK": {"target": "idle", "reenter": True},
                "PING": {"actions": "add"},
                "NOTE_A_LONGER_EVENT": {"actions": "add"},
                "GO": "busy",
            }
        },
        "busy": {
            "initial": "working",
            "on": {"PAUSE": {"actions": "add"}, "STOP": "idle"},
            "states": {
                "working": {"on": {"STEP": "working", "DONE": "finished", "RETRY": "working"}},
                "finished": {"type": "final"},
            },
        },
    },
}


def _crossing_chart(size: int = 15) -> dict[str, Any]:
    """``size`` states in a ring, each with an arrow to the next, to the
    one three ahead and to the one seven ahead: long arrows cross each
    other and the rows between their ends."""
    names = [f"s{i:02d}" for i in range(size)]
    states: dict[str, Any] = {}
    for i, name in enumerate(names):
        states[name] = {
            "on": {
                f"NEXT_{i}": names[(i + 1) % size],
                f"JUMP_{i}": names[(i + 3) % size],
                f"FAR_{i}": {"target": names[(i + 7) % size], "guard": "far"},
            }
        }
    return {"id": "crossing", "initial": names[0], "states": states}


#: 15 states and 45 transitions that cross.
CROSSING: dict[str, Any] = _crossing_chart()


def _yes(context: dict[str, Any], event: Any) -> bool:
    return True


def _no(context: dict[str, Any], event: Any) -> bool:
    return False


LOGIC = MachineLogic(
    actions={"add": lambda *a: None},
    guards={"hasItems": _yes, "paysTotal": _yes, "inStock": _no},
)

compound = create_machine(COMPOUND, logic=LOGIC)
parallel = create_machine(PARALLEL)
history = create_machine(HISTORY)
ticket = create_machine(TICKET, logic=MachineLogic(guards={"hasAssignee": _yes}))
loops = create_machine(LOOPS, logic=LOGIC)
crossing = create_machine(CROSSING, logic=MachineLogic(guards={"far": _no}))

#: Chart strings that would be markup, DOT or Mermaid syntax if they were
#: not escaped.
HOSTILE: dict[str, Any] = {
    "id": "evil",
    "initial": "<script>a()</script>",
    "states": {
        "<script>a()</script>": {
            "on": {
                '"><img src=x onerror=alert(1)>': "x&y",
                'q"]; s0 -> s1 [label="\\N': "x&y",
                "semi;colon {brace} #hash: a\nb": "x&y",
            }
        },
        "x&y": {
            "initial": "in",
            "states": {"in": {}, 'end"} state X {': {"type": "final"}},
        },
    },
}

hostile = create_machine(HOSTILE)
