"""Transition selection, transition domains, exit sets and conflict removal.

Follows XState v5 (``stateUtils.ts``): docs/engine.md, "Semantics"
(selection, conflicts, transition domain). One departure: the domain is
computed from the targets as written, a history state counting as itself
(docs/engine.md, "Differences from XState 5.33.3").

Guards are evaluated through ``check(guard) -> bool`` so the caller decides
which context they see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django_xsm.engine.chart.model import COMPOUND, HISTORY, PARALLEL, Guard, StateNode, Transition

__all__ = [
    "GuardCheck",
    "History",
    "default_history_targets",
    "effective_targets",
    "exit_mask",
    "remove_conflicts",
    "select_eventless",
    "select_transitions",
    "transition_domain",
]

GuardCheck = Callable[[Guard], bool]
History = Mapping[str, tuple[StateNode, ...]]


def select_transitions(
    node: StateNode, mask: int, event_type: str, check: GuardCheck | None
) -> list[Transition] | None:
    """XState's ``transitionNode``: enabled transitions for an event, one per
    innermost state that has one (``None`` when there is none).

    With ``check=None`` a guarded candidate raises :class:`Guarded`: the
    caller learns that the result depends on guards and cannot be cached.
    """
    if node.type == COMPOUND:
        for child in node.regions:
            if mask & child.bit:
                found = select_transitions(child, mask, event_type, check)
                if found:
                    return found
                break
    elif node.type == PARALLEL:
        collected: list[Transition] = []
        for child in node.regions:
            found = select_transitions(child, mask, event_type, check)
            if found:
                collected += found
        if collected:
            return collected
    for t in node.candidates(event_type):
        if t.guard is None:
            return [t]
        if check is None:
            raise Guarded
        if check(t.guard):
            return [t]
    return None


class Guarded(Exception):
    """Selection consulted a guard (so its result cannot be cached)."""


def select_eventless(atomic: tuple[StateNode, ...], check: GuardCheck) -> list[Transition]:
    """XState's ``selectEventlessTransitions``: for each active atomic state
    (document order), the first enabled ``always`` transition of it or its
    nearest ancestor that has one enabled. Their conflicts are removed by
    the microstep (:func:`~.microstep.compute_plan`)."""
    enabled: list[Transition] = []
    for leaf in atomic:
        for s in (leaf, *leaf.ancestors):
            chosen = next((t for t in s.always if t.guard is None or check(t.guard)), None)
            if chosen is not None:
                if chosen not in enabled:
                    enabled.append(chosen)
                break
    return enabled


def default_history_targets(hist: StateNode) -> tuple[StateNode, ...]:
    """A history state's default: its ``target``, else the parent's initial
    state (all regions for a parallel parent)."""
    if hist.history_target is not None:
        return hist.history_target
    parent = hist.parent
    assert parent is not None
    if parent.initial_node is not None:
        return (parent.initial_node,)
    return parent.regions


def effective_targets(targets: tuple[StateNode, ...], history: History) -> list[StateNode]:
    """``targets`` with history states replaced by what they stand for."""
    out: list[StateNode] = []
    for target in targets:
        if target.type == HISTORY:
            stored = history.get(target.id)
            more = stored or effective_targets(default_history_targets(target), history)
        else:
            more = [target]
        for node in more:
            if node not in out:
                out.append(node)
    return out


def uses_history(t: Transition) -> bool:
    return bool(t.targets) and any(x.type == HISTORY for x in t.targets or ())


def transition_domain(t: Transition, root: StateNode) -> StateNode | None:
    """XState's ``getTransitionDomain`` over the targets as written (a
    history state counts as itself; see the module docs). ``None``: the
    whole machine is exited and re-entered, only for a reentering
    transition of the root."""
    targets = t.targets or ()
    source = t.source
    if not t.reenter and all(x is source or x.anc_mask & source.bit for x in targets):
        return source
    if targets:
        head, tail = targets[0], [*targets[1:], source]
        for anc in head.ancestors:
            if all(x.anc_mask & anc.bit for x in tail):
                return anc
    if t.reenter:
        return None
    return root


def exit_mask(t: Transition, mask: int, root: StateNode) -> int:
    """Active states a transition exits, as a mask."""
    if not t.targets:
        return 0
    domain = transition_domain(t, root)
    if domain is None:
        return mask
    out = mask & domain.desc_mask
    if t.reenter and t.source is domain:
        out |= domain.bit
    return out


def remove_conflicts(transitions: list[Transition], mask: int, root: StateNode) -> list[Transition]:
    """SCXML ``removeConflictingTransitions`` (as XState v5 implements it)."""
    if len(transitions) < 2:
        return transitions
    exits = {id(t): exit_mask(t, mask, root) for t in transitions}
    kept: list[Transition] = []
    for t1 in transitions:
        e1 = exits[id(t1)]
        preempted = False
        losers: list[Transition] = []
        for t2 in kept:
            if e1 & exits[id(t2)]:
                if t1.source.anc_mask & t2.source.bit:
                    losers.append(t2)
                else:
                    preempted = True
                    break
        if not preempted:
            for t2 in losers:
                kept.remove(t2)
            kept.append(t1)
    return kept


#: Why an event took no transition (see :func:`refusal_reason`).
NO_TRANSITION = "no-transition"
GUARD_REFUSED = "guard-refused"


def refusal_reason(root: StateNode, mask: int, event_type: str) -> tuple[str, tuple[str, ...]]:
    """Why ``event_type`` enables nothing in the configuration ``mask``:
    ``("no-transition", ())`` when no active state has a transition for it,
    else ``("guard-refused", guard names)`` (the guards of the candidate
    transitions, in document order); ``("", ())`` when a candidate has no
    guard (the event is not refused). Reads the chart only; runs no guard."""
    guards: list[str] = []
    found = False
    stack = [root]
    while stack:
        node = stack.pop()
        for t in node.candidates(event_type):
            found = True
            if t.guard is None:
                return "", ()  # an unguarded candidate: the event is not refused
            if t.guard.type not in guards:
                guards.append(t.guard.type)
        stack.extend(c for c in reversed(node.regions) if mask & c.bit)
    return (GUARD_REFUSED, tuple(guards)) if found else (NO_TRANSITION, ())
