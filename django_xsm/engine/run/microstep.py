"""Exit set, entry set and the microstep as a plan (XState v5 ``stateUtils``).

A microstep is computed once as a :class:`MicroPlan` (exit set in reverse
document order, history to record, entry set in document order, the
ordered operations: exit actions, transition actions, then per entered
state its entry actions, deadline arming and done events) and cached on
the source :class:`Configuration` when it does not depend on history
values. Executing a plan (:mod:`.macrostep`) only runs its operations.
"""

from __future__ import annotations

from typing import Any

from django_xsm.engine.actions import BUILTIN_ACTIONS
from django_xsm.engine.chart.model import (
    COMPOUND,
    FINAL,
    HISTORY,
    PARALLEL,
    Action,
    StateNode,
    Transition,
)
from django_xsm.engine.events import done_event_type

from .configuration import Configuration
from .program import Program
from .results import Receipt
from .selection import (
    History,
    default_history_targets,
    effective_targets,
    exit_mask,
    remove_conflicts,
    transition_domain,
    uses_history,
)

__all__ = ["OP_ARM", "OP_BUILTIN", "OP_CALL", "OP_DONE", "MicroPlan", "compute_plan"]

# OP_CALL: a named action; OP_BUILTIN: a built-in action (engine.actions)
OP_CALL, OP_BUILTIN, OP_ARM, OP_DONE = 0, 1, 2, 3
Op = tuple[int, Any]


class MicroPlan:
    """One precomputed microstep. ``simple`` plans only call actions (no
    state change, no raise): the hot path runs ``actions`` directly.
    ``entered``: the states the microstep enters, as a mask of their bits."""

    __slots__ = (
        "actions",
        "cancel",
        "done",
        "entered",
        "has_calls",
        "history_updates",
        "new_cfg",
        "ops",
        "receipts",
        "simple",
        "transitions",
        "uses_history",
    )

    def __init__(
        self,
        transitions: tuple[Transition, ...],
        ops: tuple[Op, ...],
        *,
        new_cfg: Configuration,
        old_cfg: Configuration | None,
        history_updates: dict[str, tuple[StateNode, ...]],
        cancel: frozenset[str],
        done: bool,
        uses_history: bool,
        entered: int,
    ) -> None:
        self.transitions = transitions
        self.ops = ops
        self.new_cfg = new_cfg
        self.entered = entered
        self.history_updates = history_updates
        self.cancel = cancel
        self.done = done
        self.uses_history = uses_history
        self.has_calls = any(kind == OP_CALL for kind, _ in ops)
        self.simple = (
            new_cfg is old_cfg
            and not history_updates
            and not cancel
            and not done
            and all(kind == OP_CALL for kind, _ in ops)
        )
        self.actions: tuple[Action, ...] = tuple(a for _, a in ops) if self.simple else ()
        # (unchanged, changed) receipts of the fast path, set by the selection
        # cache, which owns one plan per configuration and event type
        self.receipts: tuple[Receipt, Receipt] | None = None


def _action_ops(actions: tuple[Action, ...]) -> list[Op]:
    return [(OP_BUILTIN if a.type in BUILTIN_ACTIONS else OP_CALL, a) for a in actions]


class _EntrySet:
    """XState's computeEntrySet / addDescendantStatesToEnter /
    addAncestorStatesToEnter over a mask.

    ``defaults`` are XState's ``statesForDefaultEntry``: the entered states
    whose ``initial`` actions run (the rule is docs/engine.md, "Initial
    actions")."""

    __slots__ = ("defaults", "history", "mask", "used_history")

    def __init__(self, history: History) -> None:
        self.history = history
        self.mask = 0
        self.defaults = 0
        self.used_history = False

    def add_transition(self, t: Transition, root: StateNode) -> None:
        history = self.history
        domain = transition_domain(t, root)
        source = t.source
        for s in t.targets or ():
            if s.type != HISTORY and (s is not source or source is not domain or t.reenter):
                self.mask |= s.bit
                self.defaults |= s.bit
            self.add_descendants(s)
        for s in effective_targets(t.targets or (), history):
            ancestors = _between(s, domain) if s is not domain else []
            if domain is not None and domain.type == PARALLEL:
                ancestors.append(domain)
            self.add_ancestors(ancestors, None if (source.parent is None and t.reenter) else domain)

    def add_descendants(self, node: StateNode) -> None:
        if node.type == HISTORY:
            self.used_history = True
            parent = node.parent
            assert parent is not None
            stored = self.history.get(node.id)
            targets = stored if stored else default_history_targets(node)
            if not stored and node.history_target is None:
                # the parent's initial state (its initial actions run), or
                # for a parallel parent every region, entered from the top
                self.defaults |= parent.bit
                if parent.type == PARALLEL:
                    for s in targets:
                        self.defaults |= s.bit
            for s in targets:
                self.mask |= s.bit
                self.add_descendants(s)
            for s in targets:
                self.add_ancestors(_between(s, parent), None)
        elif node.type == COMPOUND:
            init = node.initial_node
            assert init is not None
            if init.type != HISTORY:
                self.mask |= init.bit
                self.defaults |= init.bit
            self.add_descendants(init)
        elif node.type == PARALLEL:
            for child in node.regions:
                if not self.mask & child.desc_mask:
                    self.mask |= child.bit
                    self.defaults |= child.bit
                    self.add_descendants(child)

    def add_ancestors(self, ancestors: list[StateNode], domain: StateNode | None) -> None:
        for anc in ancestors:
            if domain is None or anc.anc_mask & domain.bit:
                self.mask |= anc.bit
            if anc.type == PARALLEL:
                for child in anc.regions:
                    if not self.mask & child.desc_mask:
                        self.mask |= child.bit  # filled in: not a default entry
                        self.add_descendants(child)


def _between(node: StateNode, top: StateNode | None) -> list[StateNode]:
    """Proper ancestors of ``node`` below ``top`` (exclusive; ``None``: all)."""
    out = []
    for anc in node.ancestors:
        if anc is top:
            break
        out.append(anc)
    return out


def _in_final(mask: int, node: StateNode) -> bool:
    if node.type == COMPOUND:
        return any(c.type == FINAL and mask & c.bit for c in node.regions)
    if node.type == PARALLEL:
        return all(_in_final(mask, c) for c in node.regions)
    return node.type == FINAL


def compute_plan(
    program: Program, cfg: Configuration | None, transitions: list[Transition], history: History
) -> MicroPlan:
    """The microstep for ``transitions`` from ``cfg`` (``None``: the initial
    microstep, which enters the root and its initial states)."""
    root = program.chart.root
    all_nodes = program.chart.nodes
    ops: list[Op] = []
    updates: dict[str, tuple[StateNode, ...]] = {}
    entry = _EntrySet(history)
    if cfg is None:
        filtered: list[Transition] = []
        old_mask = xmask = 0
        entry.mask = entry.defaults = root.bit
        entry.add_descendants(root)
    else:
        old_mask = cfg.mask
        filtered = remove_conflicts(transitions, old_mask, root)
        xmask = 0
        for t in filtered:
            xmask |= exit_mask(t, old_mask, root)
        exits = [n for n in reversed(cfg.nodes) if xmask & n.bit]
        for s in exits:
            for h in s.history_nodes:
                if h.history == "deep":
                    updates[h.id] = tuple(n for n in cfg.atomic if n.anc_mask & s.bit)
                else:
                    updates[h.id] = tuple(n for n in cfg.nodes if n.parent is s)
        if updates:
            entry.history = {**history, **updates}
        for t in filtered:
            entry.add_transition(t, root)
        for s in exits:
            ops += _action_ops(s.exit)
        for t in filtered:
            ops += _action_ops(t.actions)
    cur = old_mask & ~xmask
    done = False
    completed: set[int] = set()
    for node in all_nodes:
        if not entry.mask & node.bit:
            continue
        cur |= node.bit
        ops += _action_ops(node.entry)
        if node.delays:
            ops.append((OP_ARM, node))
        if node.initial_actions and entry.defaults & node.bit:
            ops += _action_ops(node.initial_actions)
        if node.type == FINAL:
            parent = node.parent
            assert parent is not None
            marker = parent if parent.type == PARALLEL else parent.parent
            if parent.type == COMPOUND:
                ops.append((OP_DONE, done_event_type(parent.id)))
            while (
                marker is not None
                and marker.type == PARALLEL
                and marker.order not in completed
                and _in_final(cur, marker)
            ):
                completed.add(marker.order)
                ops.append((OP_DONE, done_event_type(marker.id)))
                marker = marker.parent
            if marker is None:
                done = True
    if done:  # XState runs every exit action when the machine finishes
        for node in reversed(all_nodes):
            if cur & node.bit:
                ops += _action_ops(node.exit)
    new_cfg = program.configurations.get(cur)
    cancel = frozenset(n.id for n in all_nodes if xmask & n.bit and n.delays)
    hist_dep = entry.used_history or any(uses_history(t) for t in filtered)
    return MicroPlan(
        tuple(filtered),
        tuple(ops),
        new_cfg=new_cfg,
        old_cfg=cfg,
        history_updates=updates,
        cancel=cancel,
        done=done,
        uses_history=hist_dep,
        entered=entry.mask,
    )
