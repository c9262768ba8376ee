"""Chart coverage (``django_xsm.testing.coverage``): counted from the
engine's steps, whatever ran them, per chart; named, merged across
processes and reported. The plugin's ``--xsm-coverage`` over a whole
session (and ``pytest -n``) is tested on the sample project
(test_sample_project.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine, observe_steps
from django_xsm.engine.run import observe
from django_xsm.registry import machines
from django_xsm.testing import Xsm
from django_xsm.testing.coverage import (
    ChartCoverage,
    MachineCoverage,
    merge_all,
    report_lines,
    total_percent,
)

CHART: dict[str, Any] = {
    "id": "door",
    "initial": "closed",
    "states": {
        "closed": {
            "on": {
                "OPEN": [{"target": "opened", "guard": "unlocked"}, {"target": "alarm"}],
                "KNOCK": {},
            }
        },
        "opened": {"after": {"5000": "closed"}, "on": {"BREAK": "broken"}},
        "alarm": {
            "initial": "ringing",
            "states": {"ringing": {"on": {"STOP": "silent"}}, "silent": {"type": "final"}},
            "onDone": "closed",
        },
        "broken": {"always": "closed"},
        "memory": {"type": "history"},
    },
}


def door() -> Any:
    return create_machine(CHART, logic=MachineLogic(guards={"unlocked": lambda c, e: False}))


@pytest.fixture
def counter() -> Iterator[ChartCoverage]:
    found = ChartCoverage()
    found.start()
    try:
        yield found
    finally:
        found.stop()
    assert observe.current is None


def test_what_the_engine_did_is_counted(counter: ChartCoverage) -> None:
    machine = door()
    instance = machine.start()
    instance.send("KNOCK")
    instance.send("OPEN")  # the guard says no: the alarm
    instance.send("STOP")  # done: back to closed
    (found,) = counter.measure([("door", machine)])
    assert found.states == (
        ("closed", True),
        ("opened", False),
        ("alarm", True),
        ("alarm.ringing", True),
        ("alarm.silent", True),
        ("broken", False),
    )  # the root and the history pseudo-state are not states to enter
    assert [(label, taken) for _, label, taken in found.transitions] == [
        ("closed --OPEN [unlocked]--> opened", False),
        ("closed --OPEN--> alarm", True),
        ("closed --KNOCK--> (no target)", True),
        ("opened --BREAK--> broken", False),
        ("opened --after 5000--> closed", False),
        ("alarm --onDone--> closed", True),
        ("alarm.ringing --STOP--> alarm.silent", True),
        ("broken --always--> closed", False),
    ]
    assert (found.states_entered, found.transitions_taken) == (4, 4)
    assert found.never_entered == ["opened", "broken"]


def test_a_chart_compiled_again_counts_into_the_same_chart(counter: ChartCoverage) -> None:
    door().start().send("OPEN")
    again = door()
    again.start().send("KNOCK")
    (found,) = counter.measure([("door", again)])
    assert found.transitions_taken == 2
    other = create_machine(
        {**CHART, "states": {**CHART["states"], "extra": {}}},
        logic=MachineLogic(guards={"unlocked": lambda c, e: False}),
    )
    (changed,) = counter.measure([("door", other)])  # another structure: nothing counted
    assert changed.transitions_taken == 0


def test_nothing_is_counted_once_stopped() -> None:
    found = ChartCoverage()
    found.start()
    found.stop()
    door().start().send("OPEN")
    (measured,) = found.measure([("door", door())])
    assert measured.states_entered == 0


def test_stop_puts_the_previous_observer_back() -> None:
    def outer(*args: Any) -> None:
        pass

    observe_steps(outer)
    try:
        found = ChartCoverage()
        found.start()
        assert observe.current == found.observe
        found.stop()
        assert observe.current is outer
    finally:
        observe_steps(None)


def test_timers_views_and_blocks_of_the_whole_stack_count(
    counter: ChartCoverage, project: Any, settings: Any
) -> None:
    # compiled now, after the counting began (a machine that ran before
    # keeps the fast path it cached for targetless transitions)
    project(MACHINES={**settings.XSM["MACHINES"], "ticket": "tests.django.machines.ticket_factory"})
    with Xsm() as helper:
        machines["ticket"].objects.send("t:1", "BUMP", create=True)
        helper.advance(60)
        named = [("ticket", machines["ticket"].machine)]
    (found,) = counter.measure(named)
    taken = {label for _, label, seen in found.transitions if seen}
    assert taken == {"open --BUMP--> (no target)", "open --after 60000--> stale"}


def coverage(name: str, states: str, transitions: str) -> MachineCoverage:
    return MachineCoverage(
        name,
        tuple((f"s{i}", c == "1") for i, c in enumerate(states)),
        tuple((f"t{i}", f"label {i}", c == "1") for i, c in enumerate(transitions)),
    )


def test_processes_merge_what_either_saw() -> None:
    one = [coverage("door", "100", "1000"), coverage("lamp", "0", "")]
    two = [coverage("door", "010", "0100")]
    (door_cov, lamp) = merge_all([one, two])
    assert door_cov == coverage("door", "110", "1100")
    assert lamp == coverage("lamp", "0", "")
    data = [m.to_data() for m in merge_all([one, two])]
    assert [MachineCoverage.from_data(d) for d in data] == [door_cov, lamp]


def test_the_report_and_the_total() -> None:
    found = [coverage("door", "110", "1100"), coverage("lamp", "1", "")]
    assert report_lines(found) == [
        "door: states 2/3 (66.7%), transitions 2/4 (50.0%)",
        "  never entered: s2",
        "  never taken: label 2",
        "  never taken: label 3",
        "lamp: states 1/1 (100.0%), transitions 0/0 (100.0%)",
        "total: transitions 2/4 (50.0%)",
    ]
    assert total_percent(found) == 50.0
    assert total_percent([]) == 100.0
