"""History states that enter themselves by default: refused at compile time.

Entering a state enters its default descendants: a compound state its
``initial`` child, a parallel state every region, a history state without a
record its default (its ``target``, else the parent's initial state), plus
the regions of parallel states between that default and the parent. When
these edges lead from a history state back to itself, the entry set would
never be complete (``RecursionError`` at ``start()``). The walk is
iterative, like every walk over user input here.
"""

from __future__ import annotations

from collections.abc import Iterator

from django_xsm.brief import brief

from .model import COMPOUND, HISTORY, PARALLEL, StateNode
from .problems import path_join
from .specs import Problems

__all__ = ["check_history_cycles"]


def _entered(node: StateNode) -> Iterator[StateNode]:
    """What entering ``node`` by default enters next."""
    if node.type == COMPOUND:
        if node.initial_node is not None:
            yield node.initial_node
    elif node.type == PARALLEL:
        yield from node.regions
    elif node.type == HISTORY and node.parent is not None:
        parent = node.parent
        if node.history_target is not None:
            targets: tuple[StateNode, ...] = node.history_target
        elif parent.initial_node is not None:
            targets = (parent.initial_node,)
        else:
            targets = parent.regions
        for target in targets:
            yield target
            for anc in target.ancestors:
                if anc is parent:
                    break
                if anc.type == PARALLEL:
                    yield from anc.regions


def check_history_cycles(nodes: tuple[StateNode, ...], problems: Problems) -> None:
    """Append one problem per history state that enters itself by default."""
    for hist in nodes:
        if hist.type != HISTORY:
            continue
        seen = {hist.order}
        stack = list(_entered(hist))
        while stack:
            node = stack.pop()
            if node is hist:
                problems.append(_problem(hist))
                break
            if node.order not in seen:
                seen.add(node.order)
                stack.extend(_entered(node))


def _problem(hist: StateNode) -> tuple[str, str, str]:
    parent = hist.parent
    assert parent is not None
    if hist.history_target is not None:
        return (
            f"History state {brief(hist.id)} enters itself through its default target",
            path_join(hist.path, "target"),
            "target a state of its parent that is not this history state",
        )
    return (
        f"History state {brief(hist.id)} enters itself: without a 'target' it "
        f"stands for the initial state of {brief(parent.id)}, which leads back to it",
        hist.path,
        "give the history state a 'target', or make another child the initial state",
    )
