"""Delayed transitions: deadlines as data, arming, cancelling, fencing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_xsm.engine import Deadline, MachineLogic, create_machine
from django_xsm.exceptions import EventNotAcceptedError, InvalidConfigError

AFTER = "xstate.after.1000.t.wait"
TIMEOUT = "xstate.after.TIMEOUT.t.wait"

CHART: dict[str, Any] = {
    "id": "t",
    "initial": "wait",
    "context": {"fired": 0},
    "states": {
        "wait": {
            "after": {"1000": {"target": "done", "actions": "fire"}, "TIMEOUT": "late"},
            "on": {"POKE": {"target": "wait", "reenter": True}, "LEAVE": "idle", "STAY": {}},
        },
        "idle": {"on": {"BACK": "wait"}},
        "done": {},
        "late": {},
    },
}


def fire(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["fired"] += 1


LOGIC = MachineLogic(actions={"fire": fire}, delays={"TIMEOUT": lambda c, e: 2500})


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.now


def started(now: int = 5_000) -> tuple[Any, Clock]:
    clock = Clock(now)
    return create_machine(CHART, logic=LOGIC).start(clock=clock), clock


def test_entering_arms_one_deadline_per_delay() -> None:
    inst, clock = started()
    assert inst.deadlines == (
        Deadline("t.wait", 1, 6_000, AFTER, "1000"),
        Deadline("t.wait", 1, 7_500, TIMEOUT, "TIMEOUT"),
    )
    assert clock.calls == 1
    assert inst.snapshot()["entry_seq"] == 1


def test_clock_is_read_only_when_arming() -> None:
    inst, clock = started()
    inst.send("STAY")
    inst.send("LEAVE")
    assert clock.calls == 1  # leaving cancels without reading the clock
    assert inst.deadlines == ()
    clock.now = 9_000
    inst.send("BACK")
    assert clock.calls == 2
    assert [d.due_ms for d in inst.deadlines] == [10_000, 11_500]
    assert [d.entry for d in inst.deadlines] == [2, 2]


def test_reentering_rearms_with_a_new_entry_sequence() -> None:
    inst, clock = started()
    clock.now = 6_500
    receipt = inst.send("POKE")
    assert receipt.changed
    assert [(d.entry, d.due_ms) for d in inst.deadlines] == [(2, 7_500), (2, 9_000)]


def test_after_event_fires_once_and_is_consumed() -> None:
    inst, _ = started()
    receipt = inst.send(AFTER)
    assert (receipt.accepted, receipt.value) == (True, "done")
    assert inst.context["fired"] == 1
    assert inst.deadlines == ()  # consumed, and the other one cancelled on exit
    again = inst.send(AFTER)
    assert (again.accepted, again.changed) == (False, False)


def test_stale_after_event_is_ignored() -> None:
    inst, _ = started()
    inst.send("LEAVE")
    inst.send("BACK")
    inst.send("LEAVE")
    receipt = inst.send(AFTER)
    assert (receipt.accepted, receipt.changed, receipt.value) == (False, False, "idle")
    with pytest.raises(EventNotAcceptedError):
        inst.send(AFTER, strict=True)
    assert not inst.can(AFTER)


def test_guarded_after_event_that_is_refused_is_still_consumed() -> None:
    config = {
        "id": "g",
        "initial": "s",
        "states": {"s": {"after": {"10": {"target": "x", "guard": "never"}}}, "x": {}},
    }
    machine = create_machine(config, logic=MachineLogic(guards={"never": lambda c, e: False}))
    inst = machine.start(clock=lambda: 100)
    event = "xstate.after.10.g.s"
    receipt = inst.send(event)
    assert (receipt.accepted, receipt.changed) == (False, True)
    assert inst.deadlines == ()


def test_without_a_clock_now_is_the_last_known_time() -> None:
    inst = create_machine(CHART, logic=LOGIC).start()
    assert [d.due_ms for d in inst.deadlines] == [1_000, 2_500]


def test_named_delay_as_number_list_form_and_ms_keys() -> None:
    config = {
        "id": "n",
        "initial": "s",
        "states": {
            "s": {
                "after": [
                    {"delay": "SHORT", "target": "a"},
                    {"delay": 250, "target": "b"},
                    {"delay": 250, "target": "c"},
                ]
            },
            "a": {"after": {1500: "b"}},
            "b": {},
            "c": {},
        },
    }
    machine = create_machine(config, logic=MachineLogic(delays={"SHORT": 99.2}))
    inst = machine.start(clock=lambda: 0)
    assert [(d.delay, d.due_ms) for d in inst.deadlines] == [("SHORT", 100), ("250", 250)]
    assert inst.send("xstate.after.250.n.s").value == "b"  # first of the list wins
    inst = machine.start(clock=lambda: 0)
    inst.send("xstate.after.SHORT.n.s")
    assert [d.event_type for d in inst.deadlines] == ["xstate.after.1500.n.a"]


def test_delay_function_must_return_milliseconds() -> None:
    logic = MachineLogic(actions={"fire": fire}, delays={"TIMEOUT": lambda c, e: "soon"})
    with pytest.raises(InvalidConfigError, match="TIMEOUT"):
        create_machine(CHART, logic=logic).start()


def test_restore_keeps_deadlines_verbatim_and_can_fire_them() -> None:
    inst, _ = started()
    data = json.loads(json.dumps(inst.snapshot()))
    later = Clock(99_999)
    restored = inst.machine.restore(data, clock=later)
    assert restored.deadlines == inst.deadlines
    assert later.calls == 0
    assert restored.send(TIMEOUT).value == "late"


def test_deadlines_of_parallel_regions_and_done_clears_them() -> None:
    config = {
        "id": "p",
        "type": "parallel",
        "states": {
            "a": {
                "initial": "a1",
                "states": {"a1": {"after": {"5": "a2"}}, "a2": {"type": "final"}},
            },
            "b": {
                "initial": "b1",
                "states": {
                    "b1": {"after": {"7": "b2"}, "on": {"END": "b2"}},
                    "b2": {"type": "final"},
                },
            },
        },
    }
    inst = create_machine(config).start(clock=lambda: 10)
    assert [(d.state_id, d.due_ms) for d in inst.deadlines] == [("p.a.a1", 15), ("p.b.b1", 17)]
    inst.send("xstate.after.5.p.a.a1")
    assert [d.state_id for d in inst.deadlines] == ["p.b.b1"]
    receipt = inst.send("END")
    assert receipt.status == "done" and inst.deadlines == ()


def test_deadline_value_object() -> None:
    d = Deadline("t.wait", 3, 1_234, AFTER, "1000")
    assert Deadline.from_dict(d.to_dict()) == d
    assert d.to_dict() == {
        "state_id": "t.wait",
        "entry": 3,
        "due_ms": 1_234,
        "event_type": AFTER,
        "delay": "1000",
    }
    assert hash(d) == hash(Deadline.from_dict(d.to_dict()))
    with pytest.raises(AttributeError):
        d.due_ms = 0  # type: ignore[misc]
    for bad in ({}, {**d.to_dict(), "entry": "3"}, {**d.to_dict(), "due_ms": True}, [1]):
        with pytest.raises(ValueError):
            Deadline.from_dict(bad)  # type: ignore[arg-type]


def test_clock_must_return_int_milliseconds() -> None:
    with pytest.raises(InvalidConfigError, match="clock"):
        create_machine(CHART, logic=LOGIC).start(clock=lambda: "now")  # type: ignore[arg-type, return-value]


def test_a_refused_timeout_is_consumed_and_the_documented_pattern_re_arms_it() -> None:
    """docs/persistence.md: a timer whose guard refuses is consumed; the
    fallback transition with reenter arms a fresh deadline."""
    from django_xsm.engine import MachineLogic, create_machine

    paid = {"v": False}
    chart = {
        "id": "o",
        "initial": "waiting",
        "states": {
            "waiting": {
                "after": {
                    "1000": [
                        {"target": "cancelled", "guard": "stillUnpaid"},
                        {"target": "waiting", "reenter": True},
                    ]
                }
            },
            "cancelled": {},
        },
    }
    logic = MachineLogic(guards={"stillUnpaid": lambda ctx, event: not paid["v"]})
    now = [0]
    order = create_machine(chart, logic=logic).start(clock=lambda: now[0])
    [first] = order.deadlines
    paid["v"] = True  # the guard now refuses: the fallback re-enters the state
    now[0] = first.due_ms
    order.send(first.event_type)
    assert order.value == "waiting"
    [second] = order.deadlines
    assert second.due_ms == first.due_ms + 1000  # a fresh deadline from the fire's time


def test_a_timer_whose_guard_refuses_is_consumed_not_re_armed() -> None:
    from django_xsm.engine import MachineLogic, create_machine

    chart = {
        "id": "o",
        "initial": "waiting",
        "states": {"waiting": {"after": {"1000": {"target": "done", "guard": "no"}}}, "done": {}},
    }
    order = create_machine(chart, logic=MachineLogic(guards={"no": lambda c, e: False})).start(
        clock=lambda: 5000
    )
    [deadline] = order.deadlines
    order.send(deadline.event_type)
    assert order.value == "waiting" and order.deadlines == ()
