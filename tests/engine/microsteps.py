"""Looking at every microstep the engine runs (for tests only).

:func:`watching` wraps the one place a microstep is executed
(``Stepper._run_plan``) so a callback sees each one: the plan, the event,
and the configuration, history and context before it. :func:`illegal`
says what is wrong with a configuration: tests/engine/conftest.py checks
every microstep of every engine test with it, and the XState differential
(tests/engine/reference/) does the same on thousands of random charts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django_xsm.engine import Event, StateNode
from django_xsm.engine.run.configuration import Configuration
from django_xsm.engine.run.context import copy_data
from django_xsm.engine.run.macrostep import Stepper
from django_xsm.engine.run.microstep import MicroPlan


@dataclass(frozen=True)
class Before:
    """The state a microstep started from."""

    cfg: Configuration
    history: dict[str, tuple[StateNode, ...]]
    context: Any


Watcher = Callable[[Stepper, MicroPlan, Event, Before], None]


@contextmanager
def watching(watcher: Watcher) -> Iterator[None]:
    """Call ``watcher(stepper, plan, event, before)`` after each microstep
    (nested uses all run, innermost first)."""
    original = Stepper._run_plan

    def run_plan(self: Stepper, plan: MicroPlan, event: Event, queue: Any) -> None:
        state = self._state
        before = Before(state.cfg, dict(state.history), copy_data(state.context))
        original(self, plan, event, queue)
        watcher(self, plan, event, before)

    Stepper._run_plan = run_plan  # type: ignore[method-assign]
    try:
        yield
    finally:
        Stepper._run_plan = original  # type: ignore[method-assign]


def illegal(nodes: Sequence[StateNode], active: Sequence[StateNode]) -> str | None:
    """What makes ``active`` (states of a chart whose states are ``nodes``)
    an illegal configuration, or ``None``: the root is active, every active
    state's parent is active, an active compound state has exactly one
    active child, every region of an active parallel state is active."""
    on = set(active)
    if nodes and nodes[0] not in on:
        return "the root is not active"
    for node in active:
        if node.parent is not None and node.parent not in on:
            return f"{node.id} is active without its parent {node.parent.id}"
        kids = [c for c in node.regions if c in on]
        if node.type == "compound" and len(kids) != 1:
            return f"compound {node.id} has {len(kids)} active children {[c.id for c in kids]}"
        if node.type == "parallel" and len(kids) != len(node.regions):
            missing = [c.id for c in node.regions if c not in on]
            return f"parallel {node.id} misses the regions {missing}"
        if node.type == "history":
            return f"history state {node.id} is active"
    return None


def check_legal(stepper: Stepper, plan: MicroPlan, event: Event, before: Before) -> None:
    """A watcher: the configuration after the microstep is legal."""
    cfg = stepper._state.cfg
    problem = illegal(stepper._program.chart.nodes, cfg.nodes)
    assert problem is None, (
        f"illegal configuration after {event.type!r} took {list(plan.transitions)} "
        f"from {list(before.cfg.state_ids)}: {problem}"
    )
