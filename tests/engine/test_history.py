"""Shallow and deep history, history as initial, default history targets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_xsm.engine import create_machine

CHART: dict[str, Any] = {
    "id": "h",
    "initial": "a",
    "states": {
        "a": {
            "initial": "a1",
            "on": {"OUT": "z"},
            "states": {
                "shallow": {"type": "history"},
                "deep": {"type": "history", "history": "deep"},
                "a1": {"on": {"N": "a2"}},
                "a2": {"initial": "x", "states": {"x": {"on": {"N": "y"}}, "y": {}}},
            },
        },
        "z": {"on": {"SHALLOW": "#h.a.shallow", "DEEP": "a.deep", "PLAIN": "a"}},
    },
}


def visit_y() -> Any:
    inst = create_machine(CHART).start()
    inst.send("N")
    inst.send("N")
    assert inst.value == {"a": {"a2": "y"}}
    inst.send("OUT")
    return inst


def test_history_is_recorded_on_exit() -> None:
    inst = visit_y()
    assert inst.history == {"h.a.shallow": ("h.a.a2",), "h.a.deep": ("h.a.a2.y",)}
    assert inst.snapshot()["history"] == {"h.a.shallow": ["h.a.a2"], "h.a.deep": ["h.a.a2.y"]}


def test_shallow_history_restores_the_child_with_its_initial_state() -> None:
    inst = visit_y()
    assert inst.send("SHALLOW").value == {"a": {"a2": "x"}}


def test_deep_history_restores_the_leaf() -> None:
    inst = visit_y()
    assert inst.send("DEEP").value == {"a": {"a2": "y"}}


def test_plain_target_ignores_history() -> None:
    inst = visit_y()
    assert inst.send("PLAIN").value == {"a": "a1"}


def test_history_without_record_uses_parent_initial() -> None:
    config = {
        "id": "f",
        "initial": "z",
        "states": {"z": {"on": {"H": "a.deep"}}, "a": {**CHART["states"]["a"], "on": {}}},
    }
    inst = create_machine(config).start()
    assert inst.snapshot()["history"] == {}
    assert inst.send("H").value == {"a": "a1"}


def test_history_default_target() -> None:
    config = {
        "id": "d",
        "initial": "out",
        "states": {
            "out": {"on": {"IN": "in.hist"}},
            "in": {
                "initial": "one",
                "states": {
                    "hist": {"type": "history", "target": "two"},
                    "one": {},
                    "two": {},
                },
            },
        },
    }
    assert create_machine(config).start().send("IN").value == {"in": "two"}


def test_history_as_initial_state_and_in_parallel() -> None:
    config = {
        "id": "p",
        "initial": "par",
        "states": {
            "par": {
                "type": "parallel",
                "on": {"LEAVE": "away"},
                "states": {
                    "left": {
                        "initial": "h",
                        "states": {
                            "h": {"type": "history", "target": "l2"},
                            "l1": {"on": {"L": "l1b"}},
                            "l1b": {},
                            "l2": {"on": {"L": "l1"}},
                        },
                    },
                    "right": {"initial": "r1", "states": {"r1": {"on": {"R": "r2"}}, "r2": {}}},
                },
            },
            "away": {"on": {"BACK": "#p.par.left.h"}},
        },
    }
    inst = create_machine(config).start()
    assert inst.value == {"par": {"left": "l2", "right": "r1"}}
    inst.send("L")
    inst.send("R")
    assert inst.value == {"par": {"left": "l1", "right": "r2"}}
    inst.send("LEAVE")
    # the history target enters left's record; right gets its initial state
    assert inst.send("BACK").value == {"par": {"left": "l1", "right": "r1"}}


def test_restore_keeps_history() -> None:
    inst = visit_y()
    machine = inst.machine
    restored = machine.restore(json.loads(json.dumps(inst.snapshot())))
    assert restored.history == inst.history
    assert restored.send("DEEP").value == {"a": {"a2": "y"}}


# Two transitions of one microstep, one of them to a history state from
# inside the history's parent. The domain of that one is computed from the
# history state itself, so it contains the parent: the two conflict and the
# first wins. (Computed from the state the history stands for, the domain
# was that state alone: both ran and left an illegal configuration that
# restore() refused or read as another state.)
HISTORY_PAIRS = [
    (
        {
            "id": "m",
            "initial": "P",
            "states": {
                "P": {
                    "type": "parallel",
                    "states": {
                        "R": {
                            "initial": "r1",
                            "states": {"r1": {"on": {"E": "h"}}, "h": {"type": "history"}},
                        },
                        "Q": {"on": {"E": "#m.P"}},
                    },
                }
            },
        },
        "E",
        {"P": {"R": "r1", "Q": {}}},
        ("m", "m.P", "m.P.R", "m.P.R.r1", "m.P.Q"),
    ),
    (
        {
            "id": "m",
            "initial": "s4",
            "states": {
                "s2": {"type": "final"},
                "s4": {
                    "type": "parallel",
                    "states": {
                        "s8": {"on": {"b.z": "s11"}},
                        "s11": {"type": "history", "target": "s8"},
                        "s10": {"on": {"*": [{"target": ["#m.s2"]}]}},
                    },
                },
            },
        },
        "b.z",
        {"s4": {"s8": {}, "s10": {}}},
        ("m", "m.s4", "m.s4.s8", "m.s4.s10"),
    ),
    (
        {
            "id": "m",
            "initial": "P",
            "states": {
                "P": {
                    "type": "parallel",
                    "states": {
                        "R": {
                            "initial": "r1",
                            "states": {
                                "r1": {"on": {"E": "h"}},
                                "r2": {},
                                "h": {"type": "history"},
                            },
                        },
                        "Q": {"on": {"E": "#m.P.R.r2"}},
                    },
                }
            },
        },
        "E",
        {"P": {"R": "r1", "Q": {}}},
        ("m", "m.P", "m.P.R", "m.P.R.r1", "m.P.Q"),
    ),
]


@pytest.mark.parametrize(
    ("config", "event", "value", "state_ids"),
    HISTORY_PAIRS,
    ids=["parent-region-left-inactive", "state-without-its-parent", "two-active-children"],
)
def test_a_transition_to_a_history_state_conflicts_with_one_that_exits_its_parent(
    config: dict[str, Any], event: str, value: Any, state_ids: tuple[str, ...]
) -> None:
    machine = create_machine(config)
    inst = machine.start()
    receipt = inst.send(event)
    assert receipt.value == value and inst.state_ids == state_ids
    assert [t.kind for t in receipt.transitions] == ["on"]  # one of the two
    snapshot = json.loads(json.dumps(inst.snapshot()))
    assert machine.restore(snapshot).state_ids == state_ids
    assert machine.transition(snapshot, event, now=0).snapshot["value"] == value
    pure = machine.transition(machine.initial_snapshot(now=0).snapshot, event, now=0)
    assert pure.snapshot == snapshot
