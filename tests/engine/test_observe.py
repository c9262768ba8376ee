"""The step observer (``django_xsm.engine.observe_steps``): what chart
coverage counts. It sees every microstep, the fast path's included while
it is set, and nothing changes while it is not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.engine import Machine, MachineLogic, create_machine, observe_steps
from django_xsm.engine.run import observe
from django_xsm.engine.run.microstep import MicroPlan

from .conftest import ORDER, ORDER_LOGIC

Step = tuple[str, tuple[str, ...], tuple[str, ...]]


class Steps:
    """Records ``(machine id, transition paths, entered state ids)``."""

    def __init__(self) -> None:
        self.seen: list[Step] = []

    def __call__(self, program: Any, transitions: tuple[Any, ...], entered: int) -> None:
        ids = tuple(n.id for n in program.chart.nodes if entered & n.bit)
        self.seen.append((program.chart.id, tuple(t.path for t in transitions), ids))


@pytest.fixture
def steps() -> Iterator[Steps]:
    found = Steps()
    previous = observe_steps(found)
    try:
        yield found
    finally:
        observe_steps(previous)


def order() -> Machine:
    return create_machine(ORDER, logic=ORDER_LOGIC)


def test_no_observer_by_default() -> None:
    assert observe.current is None


def test_the_initial_step_enters_the_root_and_the_initial_state(steps: Steps) -> None:
    order().start()
    assert steps.seen == [("order", (), ("order", "order.cart"))]


def test_a_send_reports_its_transition_and_what_it_entered(steps: Steps) -> None:
    instance = order().start()
    steps.seen.clear()
    instance.send("PAY")
    assert steps.seen == [("order", ("states.cart.on.PAY",), ("order.paid",))]


def test_a_targetless_transition_is_seen_although_it_is_the_fast_path_otherwise(
    steps: Steps,
) -> None:
    machine = order()
    instance = machine.start()
    steps.seen.clear()
    instance.send("ADD")
    instance.send("ADD")  # the second would take the cached fast path
    assert steps.seen == [("order", ("states.cart.on.ADD",), ())] * 2
    assert instance.context["items"] == 2


def test_without_an_observer_the_fast_path_is_cached() -> None:
    machine = order()
    instance = machine.start()
    instance.send("ADD")
    entry = instance._state.cfg.selection["ADD"]
    assert type(entry) is MicroPlan and entry.receipts is not None


def test_with_an_observer_no_fast_path_is_cached(steps: Steps) -> None:
    machine = order()
    instance = machine.start()
    instance.send("ADD")
    entry = instance._state.cfg.selection["ADD"]
    assert type(entry) is MicroPlan and entry.receipts is None


TRANSIENT: dict[str, Any] = {
    "id": "t",
    "initial": "idle",
    "states": {
        "idle": {"on": {"GO": "checking"}},
        "checking": {
            "initial": "a",
            "states": {"a": {}},
            "always": [{"guard": "ok", "target": "done"}, {"target": "idle"}],
        },
        "done": {"type": "final"},
    },
}


def test_states_entered_and_left_within_one_send_are_reported(steps: Steps) -> None:
    machine = create_machine(TRANSIENT, logic=MachineLogic(guards={"ok": lambda c, e: True}))
    instance = machine.start()
    steps.seen.clear()
    instance.send("GO")
    assert steps.seen == [
        ("t", ("states.idle.on.GO",), ("t.checking", "t.checking.a")),
        ("t", ("states.checking.always[0]",), ("t.done",)),
    ]
    assert instance.state_ids == ("t", "t.done")


def test_a_step_that_raised_is_not_reported_the_steps_before_it_are(steps: Steps) -> None:
    def boom(*args: Any) -> None:
        raise RuntimeError("boom")

    chart = {
        "id": "f",
        "initial": "a",
        "states": {
            "a": {"on": {"GO": "b", "FAIL": "c"}},
            "b": {"always": "c"},
            "c": {"entry": "boom"},
        },
    }
    machine = create_machine(chart, logic=MachineLogic(actions={"boom": boom}))
    instance = machine.start()
    steps.seen.clear()
    with pytest.raises(RuntimeError):
        instance.send("FAIL")
    assert steps.seen == []
    with pytest.raises(RuntimeError):
        instance.send("GO")
    assert steps.seen == [("f", ("states.a.on.GO",), ("f.b",))]
    assert instance.state_ids == ("f", "f.a")  # the send was rolled back


def test_the_pure_api_is_observed_too(steps: Steps) -> None:
    machine = order()
    snapshot = machine.initial_snapshot(now=0).snapshot
    steps.seen.clear()
    machine.transition(snapshot, "PAY", now=0)
    assert steps.seen == [("order", ("states.cart.on.PAY",), ("order.paid",))]


def test_observe_steps_returns_the_observer_it_replaces(steps: Steps) -> None:
    other = Steps()
    assert observe_steps(other) is steps
    order().start()
    assert observe_steps(steps) is other
    assert other.seen and not steps.seen
