"""The engine against XState 5.33.3 (tests/engine/reference/).

``recorded.json`` holds hand-written cases with XState's results, computed
by ``xstate_cases.mjs`` (``python -m tests.engine.reference.record``), so
these tests need no node: a case without ``difference`` must give the same
state value, context, action calls (with the event each saw), emitted
events, status, acceptance and timers after every step; a case with one
pins the engine's own result for a difference docs/engine.md documents
("Differences from XState 5.33.3"), and the predicate of
``differences.py`` must name it. With node and the locked packages
installed, the recordings are checked against XState itself and a short
random differential runs (``.ci/run`` runs the long one).
"""

from __future__ import annotations

from typing import Any

import pytest

from .reference import differential
from .reference.cases import compare, run_engine
from .reference.node import require, run_xstate
from .reference.record import definition, load, verdict

CASES = load()
AGREED = [c for c in CASES if "difference" not in c]
DIFFERENT = {c["name"]: c for c in CASES if "difference" in c}


def pinned(name: str, difference: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The case's engine steps, checked against the pinned ones; the
    disagreement with XState is the documented ``difference``."""
    case = DIFFERENT[name]
    found, engine = verdict(case, case["xstate"])
    assert found == difference
    assert engine == case["engine"]
    return case, engine


@pytest.mark.parametrize("case", AGREED, ids=[c["name"] for c in AGREED])
def test_the_engine_agrees_with_xstate(case: dict[str, Any]) -> None:
    assert compare(run_engine(case), case["xstate"]) is None


def test_every_documented_difference_has_a_case() -> None:
    from .reference.differences import DIFFERENCES

    named = {c["difference"] for c in DIFFERENT.values()}
    assert named == {d.name for d in DIFFERENCES} - {"stale-timer"}
    assert "stale-timer" in DIFFERENT  # pinned below; its cause is another difference


@pytest.mark.parametrize(
    ("name", "step", "value", "calls"),
    [
        ("history-domain-sibling-region", 1, {"P": {"R": "r1", "Q": {}}}, [4, 3]),
        ("history-domain-parallel-history", 1, {"s4": {"s8": {}, "s10": {}}}, [4, 2, 1, 3]),
        ("history-domain-two-children", 1, {"P": {"R": "r1", "Q": {}}}, [2, 1]),
        ("history-domain-deep-record", 4, {"A": {"a1": "a1y"}}, [4, 2, 1, 3]),
    ],
)
def test_history_domain_from_the_history_state_keeps_the_configuration_legal(
    name: str, step: int, value: Any, calls: list[int]
) -> None:
    """A transition to a history state has its domain computed from the
    history state (a child of its parent). XState's leaves m.P.R inactive,
    m.s4.s8 without m.s4, two active children of m.P.R, or enters active
    states again (entry actions without exit); the engine's transition
    exits what it enters (exit actions: even ids, entry: odd) and its
    configurations are legal (conftest.py checks every microstep)."""
    _, engine = pinned(name, "history-domain")
    assert engine[step]["value"] == value
    assert [call[1]["id"] for call in engine[step]["actions"]] == calls


def test_same_value_assign_stops_where_xstate_loops() -> None:
    case, engine = pinned("same-value-assign", "same-value-assign")
    assert case["xstate"][0]["error"] == "loop"
    assert engine[0]["context"] == {"n": 1} and len(engine[0]["actions"]) == 2


def test_eventless_transitions_are_selected_in_document_order() -> None:
    case, engine = pinned("selection-order", "selection-order")
    assert [a[1] for a in engine[1]["actions"][1:]] == [{"id": 1}, {"id": 2}]
    assert [a[1] for a in case["xstate"][1]["actions"][1:]] == [{"id": 2}, {"id": 1}]


def test_a_delayed_transition_with_a_list_of_targets_is_taken() -> None:
    case, engine = pinned("after-list-target", "after-list-target")
    assert engine[1]["value"] == "b" and case["xstate"][1]["value"] == "a"


def test_a_parallel_history_default_enters_every_region() -> None:
    case, engine = pinned("parallel-history-default", "parallel-history-default")
    assert engine[2]["value"] == {"P": {"A": "a1", "B": "b1"}}
    assert engine[2]["actions"] == []  # the parallel state stays; its entry does not run
    assert case["xstate"][2]["actions"] == [["log", {"id": 1}, "RESET"]]


def test_a_state_holds_only_the_timers_of_its_current_entry() -> None:
    """XState enters P again while it is active and keeps the first timer,
    which fires early; the engine never enters an active state, and leaving
    a state cancels all its timers."""
    case, engine = pinned("stale-timer", "parallel-history-default")
    assert case["xstate"][2]["stale_timers"] == ["xstate.after.100.m.P"]
    assert engine[2]["timers"] == [["xstate.after.100.m.P", 100]]
    assert engine[4]["timers"] == [] and case["xstate"][3]["timers"] != []


def test_the_recordings_are_xstates_results() -> None:
    require()
    fresh = run_xstate([definition(c) for c in CASES])
    assert [r["steps"] for r in fresh] == [c["xstate"] for c in CASES]


def test_a_short_random_differential_finds_nothing_unexplained() -> None:
    require()
    outcome = differential.run(100, seed=1_000_000)
    assert outcome.unexplained == []
    assert outcome.agreed > 80
