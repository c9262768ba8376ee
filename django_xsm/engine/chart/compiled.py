"""The compiled chart: :class:`Chart`, what :func:`~.build.compile_chart` returns.

It holds the node tree in document order and the indexes the run needs
(state by id, the names ``matches()`` accepts), and derives the structure
hash that tells snapshots of one chart from those of another.
"""

from __future__ import annotations

from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.events import descriptor_matches, is_wildcard, reserved_namespace

from .model import HISTORY, Frozen, StateNode, Transition
from .problems import suggest

__all__ = ["Chart", "build_match_index", "structure_hash"]


class Chart(Frozen):
    """A checked, compiled chart (immutable), its indexes computed once:
    ``nodes`` in document order (root first), ``events`` (every transition's
    descriptor, first occurrence first), ``event_types`` (the exact ones
    outside the reserved namespaces: what a caller sends by name)."""

    __slots__ = (
        "_descriptors",
        "_hash",
        "by_id",
        "event_types",
        "events",
        "id",
        "match_index",
        "nodes",
        "root",
        "wildcards",
    )

    id: str
    root: StateNode
    nodes: tuple[StateNode, ...]
    by_id: dict[str, StateNode]
    match_index: dict[str, StateNode]
    events: tuple[str, ...]
    wildcards: tuple[str, ...]
    event_types: tuple[str, ...]
    _descriptors: frozenset[str]
    _hash: str | None

    def __init__(self, nodes: tuple[StateNode, ...], by_id: dict[str, StateNode]) -> None:
        root = nodes[0]  # its id is the machine id: the root has no explicit id
        events = tuple(dict.fromkeys(t.event for n in nodes for t in n.transitions if t.event))
        self._init_fields(
            id=root.id,
            root=root,
            nodes=nodes,
            by_id=by_id,
            match_index=build_match_index(root, nodes),
            events=events,
            wildcards=tuple(e for e in events if is_wildcard(e)),
            event_types=tuple(
                e for e in events if not is_wildcard(e) and not reserved_namespace(e)
            ),
            _descriptors=frozenset(events),
            _hash=None,
        )

    def knows(self, event_type: str) -> bool:
        """Can some state of the chart ever take ``event_type``? True when a
        descriptor names it exactly or a wildcard matches it (a chart with
        ``*`` anywhere knows every type). Reads the chart only."""
        if event_type in self._descriptors:
            return True
        return any(descriptor_matches(w, event_type) for w in self.wildcards)

    def close_event_types(self, event_type: str, limit: int = 3) -> tuple[str, ...]:
        """Up to ``limit`` of :attr:`event_types` closest to ``event_type``
        (difflib's similarity of at least 0.6, ignoring case), closest
        first, ties in document order: the suggestions for a typo.
        ``difflib`` is imported only here."""
        import difflib

        matcher = difflib.SequenceMatcher()
        matcher.set_seq2(event_type.casefold())
        scored: list[tuple[float, int, str]] = []
        for index, name in enumerate(self.event_types):
            matcher.set_seq1(name.casefold())
            if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
                ratio = matcher.ratio()
                if ratio >= 0.6:
                    scored.append((-ratio, index, name))
        return tuple(name for _, _, name in sorted(scored)[:limit])

    @property
    def structure_hash(self) -> str:
        """Stable hex digest of the structure (see :func:`structure_hash`)."""
        found = self._hash
        if found is None:
            found = structure_hash(self.nodes)
            self._init_fields(_hash=found)
        return found

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every transition of the chart, states in document order."""
        return tuple(t for n in self.nodes for t in n.transitions)

    def get_state(self, state_id: str) -> StateNode:
        """A state by full id (``"order.cart"``), ``#id`` or path (``"cart"``)."""
        node = self.by_id.get(state_id) or self.match_index.get(state_id)
        if node is None:
            hint = suggest(state_id, self.by_id)
            raise KeyError(
                f"Unknown state {brief(state_id)} in machine {brief(self.id)}"
                + (f"; {hint}" if hint else "")
            )
        return node


def build_match_index(root: StateNode, nodes: tuple[StateNode, ...]) -> dict[str, StateNode]:
    """Names accepted by ``matches()``: the key path relative to the root
    (``"paid"``, ``"a.b"``), the same prefixed by the machine id
    (``"order.paid"``), full ids and ``#explicit-id``. Relative paths win
    when a name is ambiguous."""
    index: dict[str, StateNode] = {}
    rel: dict[StateNode, str] = {root: ""}
    for node in nodes:
        if node.parent is not None:
            parent_rel = rel[node.parent]
            rel[node] = f"{parent_rel}.{node.key}" if parent_rel else node.key
    for node in nodes:
        index[f"#{node.id}"] = node
    for node in nodes:
        if node.type != HISTORY:
            index.setdefault(node.id, node)
            index[f"{root.id}.{rel[node]}" if rel[node] else root.id] = node
    for node in nodes:
        if node.parent is not None and node.type != HISTORY:
            index[rel[node]] = node
    return index


def structure_hash(nodes: tuple[StateNode, ...]) -> str:
    """Stable hex digest of the chart's structure: states, types, initial
    states, history types and defaults, transitions (kind, event, targets,
    reenter) and delays. Logic (action/guard/delay functions and names) is
    not part of it."""
    import hashlib
    import json

    rows: list[Any] = []
    for n in nodes:
        rows.append(
            [
                n.id,
                n.key,
                n.type,
                n.parent.id if n.parent else None,
                n.initial,
                n.history,
                [t.id for t in n.history_target or ()],
                [[t.kind, t.event, list(t.target_ids), t.reenter] for t in n.transitions],
                [d for d, _ in n.after],
            ]
        )
    text = json.dumps(rows, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]
