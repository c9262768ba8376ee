"""The compiled, immutable chart: :class:`StateNode`, :class:`Transition`,
:class:`Action` and :class:`Guard`.

Nodes are numbered in document order (pre-order, children in key order);
``order`` is that number and ``bit`` is ``1 << order`` so a configuration is
one int. All objects refuse attribute assignment after compilation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django_xsm.engine.events import descriptor_matches

__all__ = [
    "ATOMIC",
    "COMPOUND",
    "FINAL",
    "HISTORY",
    "PARALLEL",
    "Action",
    "Frozen",
    "Guard",
    "StateNode",
    "Transition",
]

ATOMIC = "atomic"
COMPOUND = "compound"
PARALLEL = "parallel"
FINAL = "final"
HISTORY = "history"

# per-node memo of candidate transitions per event type; bounded so random
# event names cannot grow memory without limit
_MEMO_LIMIT = 1024


class Frozen:
    """Base of the engine's value objects: every field is set once, by
    ``_init_fields`` (in ``__init__``, or while compiling), and assignment
    afterwards raises."""

    __slots__ = ()

    def _init_fields(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} objects are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} objects are immutable")


class Action(Frozen):
    """An action reference: ``type`` (name) and ``params`` (read-only mapping
    or ``None``). This object is the ``action`` argument of action
    functions. ``xstate.raise`` and ``xstate.emit`` actions carry the event
    they raise or emit in ``builtin_event`` instead of a function."""

    __slots__ = ("builtin_event", "fn", "params", "path", "type")

    type: str
    params: Mapping[str, Any] | None
    fn: Callable[..., Any] | None
    builtin_event: Mapping[str, Any] | None
    path: str

    def __init__(
        self,
        type: str,
        params: Mapping[str, Any] | None,
        path: str,
        fn: Callable[..., Any] | None = None,
        builtin_event: Mapping[str, Any] | None = None,
    ) -> None:
        self._init_fields(type=type, params=params, path=path, fn=fn, builtin_event=builtin_event)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.params is not None:
            out["params"] = dict(self.params)
        if self.builtin_event is not None:
            out["event"] = dict(self.builtin_event)
        return out

    def __repr__(self) -> str:
        return f"Action({self.type!r})"


class Guard(Frozen):
    """A guard reference: ``type`` (name), ``params``; ``wants_params`` is
    true when the function takes a third positional parameter."""

    __slots__ = ("fn", "params", "path", "type", "wants_params")

    type: str
    params: Mapping[str, Any] | None
    fn: Callable[..., Any]
    wants_params: bool
    path: str

    def __init__(
        self,
        type: str,
        params: Mapping[str, Any] | None,
        path: str,
        fn: Callable[..., Any],
        wants_params: bool,
    ) -> None:
        self._init_fields(type=type, params=params, path=path, fn=fn, wants_params=wants_params)

    def __repr__(self) -> str:
        return f"Guard({self.type!r})"


class Transition(Frozen):
    """One transition of the chart; its public fields are docs/engine.md,
    "StateNode, Transition". Receipts list the transitions taken as these
    objects."""

    __slots__ = (
        "actions",
        "delay",
        "event",
        "guard",
        "kind",
        "path",
        "reenter",
        "source",
        "source_id",
        "target_ids",
        "targets",
    )

    source: StateNode
    targets: tuple[StateNode, ...] | None
    event: str
    kind: str
    guard: Guard | None
    actions: tuple[Action, ...]
    reenter: bool
    delay: str | None
    path: str
    source_id: str
    target_ids: tuple[str, ...]

    def __init__(self, **values: Any) -> None:
        self._init_fields(**values)

    @property
    def guard_name(self) -> str | None:
        return self.guard.type if self.guard is not None else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: source, targets, event, kind, guard, actions."""
        return {
            "source": self.source_id,
            "targets": list(self.target_ids),
            "event": self.event,
            "kind": self.kind,
            "guard": self.guard_name,
            "actions": [a.type for a in self.actions],
            "reenter": self.reenter,
        }

    def __repr__(self) -> str:
        label = self.event or "always"
        return f"Transition({self.source_id!r} --{label}--> {list(self.target_ids)!r})"


class StateNode(Frozen):
    """A state of the compiled chart; its public fields are docs/engine.md,
    "StateNode, Transition" (``transitions``: on, always, after, onDone, in
    that order; ``initial_actions``: of the object form of ``initial``)."""

    __slots__ = (
        "_memo",
        "after",
        "always",
        "anc_mask",
        "ancestors",
        "bit",
        "children",
        "delays",
        "depth",
        "desc_mask",
        "description",
        "entry",
        "exit",
        "history",
        "history_nodes",
        "history_target",
        "id",
        "initial",
        "initial_actions",
        "initial_node",
        "key",
        "meta",
        "on",
        "order",
        "parent",
        "path",
        "regions",
        "tags",
        "transitions",
        "type",
        "wildcards",
    )

    id: str
    key: str
    type: str
    parent: StateNode | None
    children: tuple[StateNode, ...]
    regions: tuple[StateNode, ...]  # children without history nodes
    history_nodes: tuple[StateNode, ...]
    initial: str | None
    initial_node: StateNode | None
    initial_actions: tuple[Action, ...]
    history: str | None
    history_target: tuple[StateNode, ...] | None
    order: int
    bit: int
    depth: int
    ancestors: tuple[StateNode, ...]  # proper ancestors, parent first
    anc_mask: int  # OR of the ancestors' bits
    desc_mask: int  # OR of the descendants' bits
    on: Mapping[str, tuple[Transition, ...]]
    wildcards: tuple[tuple[str, tuple[Transition, ...]], ...]
    always: tuple[Transition, ...]
    after: tuple[tuple[str, str], ...]
    delays: tuple[tuple[str, str, Any], ...]  # (delay, event type, ms | fn | number)
    transitions: tuple[Transition, ...]
    entry: tuple[Action, ...]
    exit: tuple[Action, ...]
    description: str | None
    meta: Any
    tags: tuple[str, ...]
    path: str
    _memo: dict[str, tuple[Transition, ...]]

    def __init__(self, **values: Any) -> None:
        self._init_fields(_memo={}, **values)

    def candidates(self, event_type: str) -> tuple[Transition, ...]:
        """Transitions of this node that may fire for ``event_type``, in the
        order XState v5 (``getCandidates``, 5.32.2+) tries them: the exact
        descriptor's, then the matching wildcards', longest descriptor
        first (ties in document order). A wildcard is a fallback: it is
        tried when every guard before it failed."""
        memo = self._memo
        found = memo.get(event_type)
        if found is not None:
            return found
        found = self.on.get(event_type, ())
        if self.wildcards:
            matching = [
                (d, ts)
                for d, ts in self.wildcards
                if d != event_type and descriptor_matches(d, event_type)
            ]
            matching.sort(key=lambda item: -len(item[0]))  # stable: ties keep order
            found += tuple(t for _, ts in matching for t in ts)
        if len(memo) < _MEMO_LIMIT:
            memo[event_type] = found
        return found

    def is_descendant_of(self, other: StateNode) -> bool:
        """Strict descendant test."""
        return bool(self.anc_mask & other.bit)

    def __repr__(self) -> str:
        return f"StateNode({self.id!r}, {self.type})"
