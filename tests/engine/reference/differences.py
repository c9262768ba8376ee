"""The documented differences from XState 5.33.3, as predicates.

docs/engine.md ("Differences from XState 5.33.3") lists each with its
example and the test that pins it. When the engine and XState disagree on
a step, :func:`classify` names the difference that explains it: the first
whose predicate holds for that step. A predicate looks at what the step
did (the transitions either side selected, the events delivered, XState's
timers and selection order, the engine's configuration), never at the chart
as a whole, so a chart that shows one difference is still checked
everywhere else. A disagreement no predicate explains is a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django_xsm.engine import Machine, StateNode, Transition

from .cases import EngineRun, Step
from .domains import departs

ASSIGNS = ("inc", "set")


@dataclass(frozen=True)
class Facts:
    """What a predicate may look at: the case's engine run (machine,
    instance after the step, history before it) and both step results."""

    run: EngineRun
    engine: Step
    xstate: Step

    @property
    def machine(self) -> Machine:
        return self.run.machine

    def node(self, state_id: str) -> StateNode:
        return self.machine.get_state(state_id)

    def transition(self, source: str, targets: list[str], reenter: bool) -> Transition:
        """The chart's transition with this source, these targets and this
        ``reenter`` (the domain depends on nothing else)."""
        for t in self.node(source).transitions:
            if list(t.target_ids) == targets and t.reenter == reenter:
                return t
        raise LookupError(f"no transition {source} -> {targets} (reenter={reenter})")

    def transitions(self) -> Iterator[tuple[StateNode, list[StateNode]]]:
        """``(source, written targets)`` of every transition the engine took
        in this step and every one XState selected."""
        pairs = [pair[:2] for pair in self.engine.get("transitions", [])]
        pairs += [pair[:2] for micro in self.xstate.get("microsteps", []) for pair in micro[1]]
        for source, targets in pairs:
            yield self.node(source), [self.node(t) for t in targets]

    def delivered(self) -> set[str]:
        return {e["type"] for e in self.engine["events"]} | {
            e["type"] for e in self.xstate["events"]
        }


def history_domain(facts: Facts) -> bool:
    """A transition to a history state whose domain (computed by the engine
    from the history state itself, a child of its parent) differs from
    XState's (computed from the states it stands for): one the engine took,
    or one XState selected, judged with XState's history at that moment."""
    if facts.engine.get("domain_departures"):
        return True
    root = facts.machine.root
    for micro in facts.xstate.get("microsteps", []):
        history = {h: [facts.node(i) for i in ids] for h, ids in micro[3].items()}
        for source, targets, reenter in micro[1]:
            t = facts.transition(source, targets, reenter)
            if departs(root, t, history):
                return True
    return False


def parallel_history_default(facts: Facts) -> bool:
    """A transition targets a history state of a parallel state that has no
    ``target`` and nothing recorded: the engine enters every region, XState
    re-enters the parallel state itself."""
    return any(
        target.type == "history"
        and target.history_target is None
        and target.parent is not None
        and target.parent.type == "parallel"
        and target.id not in facts.run.history_before
        for _, targets in facts.transitions()
        for target in targets
    )


def after_list_target(facts: Facts) -> bool:
    """A delayed transition written as a list of target strings fired: XState
    drops the target, the engine takes it."""
    return bool(facts.delivered() & list_after_events(facts.run.case["machine"]))


def selection_order(facts: Facts) -> bool:
    """XState selected several transitions at once while its active states
    were not in document order (it selects in the order states were
    entered; the engine in document order)."""
    return any(len(micro[1]) > 1 and not micro[2] for micro in facts.xstate.get("microsteps", []))


def same_value_assign(facts: Facts) -> bool:
    """XState looped to its microstep cap, running assigns, where the engine
    took an eventless transition that ran an assign yet left the
    configuration, the history and the context (compared by value) as
    they were, and so selected no eventless transition again; XState takes
    every assign as a change and selects again."""
    return (
        facts.xstate.get("error") == "loop"
        and not facts.engine.get("error")
        and facts.engine.get("quiet_assigns", 0) > 0
        and any(call[0] in ASSIGNS for call in facts.xstate["actions"])
    )


def stale_timer(facts: Facts) -> bool:
    """XState holds a stale duplicate of a timer (its state was entered
    again while active) or one fired in this step."""
    return bool(facts.xstate.get("stale_timers")) or any(
        e.get("stale") for e in facts.xstate["events"]
    )


@dataclass(frozen=True)
class Difference:
    name: str  # the anchor of its entry in docs/engine.md
    applies: Callable[[Facts], bool]


#: In the order :func:`classify` tries them: the narrowest first, and a
#: cause before its symptoms (the history rules re-enter active states,
#: which leaves stale timers).
DIFFERENCES = (
    Difference("after-list-target", after_list_target),
    Difference("parallel-history-default", parallel_history_default),
    Difference("history-domain", history_domain),
    Difference("selection-order", selection_order),
    Difference("same-value-assign", same_value_assign),
    Difference("stale-timer", stale_timer),
)


def classify(facts: Facts) -> str | None:
    """The name of the documented difference that explains a disagreement
    on this step, or ``None``."""
    for difference in DIFFERENCES:
        if difference.applies(facts):
            return difference.name
    return None


def list_after_events(config: dict[str, Any]) -> set[str]:
    """The ``xstate.after.*`` event types of delayed transitions written as
    a list that holds a target string."""
    found: set[str] = set()

    def walk(node: dict[str, Any], state_id: str) -> None:
        for delay, value in node.get("after", {}).items():
            if isinstance(value, list) and any(isinstance(v, str) for v in value):
                found.add(f"xstate.after.{delay}.{state_id}")
        for key, child in node.get("states", {}).items():
            walk(child, child.get("id", f"{state_id}.{key}"))

    walk(config, config.get("id", "(machine)"))
    return found
