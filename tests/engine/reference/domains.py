"""XState 5.33.3's transition domain for a transition that targets a
history state (``getTransitionDomain`` over ``getEffectiveTargetStates``),
to tell when the engine's domain departs from it (docs/engine.md,
"Differences from XState 5.33.3": the domain of a transition to a history
state). Read from XState's source; the engine itself computes the domain
from the targets as written (``django_xsm/engine/run/selection.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from django_xsm.engine import StateNode, Transition
from django_xsm.engine.run.selection import transition_domain

History = Mapping[str, Sequence[StateNode]]


def xstate_targets(targets: Iterable[StateNode], history: History) -> list[StateNode]:
    """``getEffectiveTargetStates``: a history state stands for what it
    recorded, else its ``target``, else its parent (a parallel parent) or
    the parent's initial state."""
    out: list[StateNode] = []
    for target in targets:
        if target.type != "history":
            found = [target]
        elif history.get(target.id):
            found = list(history[target.id])
        elif target.history_target is not None:
            found = xstate_targets(target.history_target, history)
        else:
            parent = target.parent
            assert parent is not None
            if parent.type == "parallel":
                found = [parent]
            else:
                assert parent.initial_node is not None
                found = xstate_targets([parent.initial_node], history)
        out += [n for n in found if n not in out]
    return out


def xstate_domain(
    source: StateNode, targets: Sequence[StateNode], reenter: bool, history: History
) -> StateNode | None:
    """``getTransitionDomain`` (``None``: a reentering root transition)."""
    effective = xstate_targets(targets, history)
    if not reenter and all(x is source or x.is_descendant_of(source) for x in effective):
        return source
    if effective:
        head, tail = effective[0], [*effective[1:], source]
        for anc in head.ancestors:
            if all(x.is_descendant_of(anc) for x in tail):
                return anc
    if reenter:
        return None
    return source.ancestors[-1] if source.ancestors else source


def departs(root: StateNode, transition: Transition, history: History) -> bool:
    """Does the engine's domain of ``transition`` differ from XState's under
    ``history`` (only ever for a transition that targets a history state)?"""
    targets = transition.targets or ()
    if not any(t.type == "history" for t in targets):
        return False
    ours = transition_domain(transition, root)
    theirs = xstate_domain(transition.source, targets, transition.reenter, history)
    return ours is not theirs
