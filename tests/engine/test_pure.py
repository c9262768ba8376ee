"""The pure step: initial_snapshot() and transition() execute nothing."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from django_xsm.engine import ActionCall, Event, MachineLogic, TransitionResult, create_machine
from django_xsm.exceptions import InvalidConfigError, InvalidEventError

CHART: dict[str, Any] = {
    "id": "shop",
    "initial": "cart",
    "context": {"items": 0},
    "entry": "hello",
    "states": {
        "cart": {
            "exit": "leave_cart",
            "on": {
                "ADD": {"actions": [{"type": "add", "params": {"by": 1}}]},
                "PAY": {
                    "target": "paying",
                    "guard": "has_items",
                    "actions": {"type": "xstate.raise", "event": {"type": "CHARGE", "amount": 5}},
                },
            },
        },
        "paying": {
            "after": {"30000": "cart"},
            "on": {"CHARGE": {"target": "paid", "actions": "charge"}},
        },
        "paid": {"type": "final"},
    },
}
CALLS: list[str] = []
LOGIC = MachineLogic(
    actions={
        n: (lambda i, c, e, a, n=n: CALLS.append(n))
        for n in ("hello", "leave_cart", "add", "charge")
    },
    guards={"has_items": lambda c, e: c["items"] > 0},
)


@pytest.fixture(autouse=True)
def _no_calls() -> Any:
    CALLS.clear()
    yield
    assert CALLS == [], "the pure API executed an action"


def test_initial_snapshot_lists_entry_actions() -> None:
    machine = create_machine(CHART, logic=LOGIC)
    result = machine.initial_snapshot(now=1_000)
    assert isinstance(result, TransitionResult)
    assert (result.accepted, result.changed) == (True, True)
    assert result.snapshot["value"] == "cart"
    assert result.actions == (ActionCall("hello", None, Event("xstate.init")),)


def test_transition_returns_actions_in_order_and_never_mutates_input() -> None:
    machine = create_machine(CHART, logic=LOGIC)
    snap = machine.initial_snapshot({"items": 2}, now=0).snapshot
    frozen = copy.deepcopy(snap)
    result = machine.transition(snap, "PAY", now=5_000)
    assert snap == frozen
    assert result.snapshot is not snap and result.snapshot["context"] is not snap["context"]
    assert result.snapshot["value"] == "paid" and result.snapshot["status"] == "done"
    assert [(a.type, a.event.type) for a in result.actions] == [
        ("leave_cart", "PAY"),
        ("charge", "CHARGE"),
    ]
    assert result.actions[1].event.data == {"amount": 5}
    assert [t.event for t in result.transitions] == ["PAY", "CHARGE"]
    assert json.loads(json.dumps(result.snapshot)) == result.snapshot
    assert result.actions[0].to_dict() == {
        "type": "leave_cart",
        "params": None,
        "event": {"type": "PAY"},
    }


def test_guards_see_the_input_context() -> None:
    machine = create_machine(CHART, logic=LOGIC)
    snap = machine.initial_snapshot(now=0).snapshot
    added = machine.transition(snap, "ADD", now=0)
    assert added.actions[0].params == {"by": 1}
    assert added.snapshot["context"] == {"items": 0}  # actions did not run
    refused = machine.transition(added.snapshot, "PAY", now=0)
    assert (refused.accepted, refused.changed, refused.actions) == (False, False, ())
    assert refused.snapshot == added.snapshot


def test_deadlines_use_the_given_now() -> None:
    machine = create_machine(
        {**CHART, "states": {**CHART["states"], "paying": {"after": {"30000": "cart"}}}},
        logic=LOGIC,
    )
    snap = machine.initial_snapshot({"items": 1}, now=0).snapshot
    result = machine.transition(snap, "PAY", now=5_000)
    assert result.snapshot["deadlines"] == [
        {
            "state_id": "shop.paying",
            "entry": 1,
            "due_ms": 35_000,
            "event_type": "xstate.after.30000.shop.paying",
            "delay": "30000",
        }
    ]
    fired = machine.transition(result.snapshot, "xstate.after.30000.shop.paying", now=40_000)
    assert fired.snapshot["value"] == "cart" and fired.snapshot["deadlines"] == []
    stale = machine.transition(fired.snapshot, "xstate.after.30000.shop.paying", now=40_000)
    assert stale.accepted is False


def test_pure_and_live_agree_when_actions_are_absent() -> None:
    machine = create_machine(CHART, logic=LOGIC)
    live = machine.start({"items": 1}, clock=lambda: 7)
    CALLS.clear()
    result = machine.transition(
        machine.initial_snapshot({"items": 1}, now=7).snapshot, "PAY", now=7
    )
    live.send("PAY")
    CALLS.clear()
    assert result.snapshot == live.snapshot()


def test_bad_arguments() -> None:
    machine = create_machine(CHART, logic=LOGIC)
    snap = machine.initial_snapshot(now=0).snapshot
    with pytest.raises(InvalidConfigError, match="now"):
        machine.transition(snap, "ADD", now="soon")  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError):
        machine.transition(snap, 42, now=0)
