"""A chart as a plain graph: the one model every renderer draws.

The engine's nodes know how to run; a renderer needs less and something
else: which boxes nest in which, what each arrow says, what is active and
which arrows an instance used. :func:`chart_graph` extracts that once, so
the DOT source, the Mermaid text and the built-in layout cannot disagree
about what the chart contains. Node and edge ids are positions (``s3``,
``e7``), never chart strings: a renderer can put them in attributes and
DOT identifiers without escaping them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django_xsm.engine import Machine, StateNode, Transition

__all__ = [
    "Edge",
    "Graph",
    "LogLike",
    "Node",
    "chart_graph",
    "describe_transition",
    "edge_label",
    "ids_of_value",
    "short_id",
]


def short_id(machine: Machine, state_id: str) -> str:
    """``state_id`` without the machine id (``order.paid`` -> ``paid``)."""
    return state_id.removeprefix(f"{machine.id}.")


def edge_label(transition: Transition) -> str:
    """What an arrow says: ``PAY [ok]``, ``after 60000``, ``always``, ``onDone``."""
    if transition.kind == "always" or not transition.event:
        label = "always"
    elif transition.kind == "after":
        label = f"after {transition.delay}"
    elif transition.kind == "onDone":
        label = "onDone"
    else:
        label = transition.event
    if transition.guard_name:
        label += f" [{transition.guard_name}]"
    return label


def describe_transition(machine: Machine, transition: Transition) -> str:
    """One line for a transition: ``PAY → paid [guard]``, ``after 1000 → x``."""
    head = edge_label(transition)
    label, _, guard = head.partition(" [")
    targets = ", ".join(short_id(machine, t) for t in transition.target_ids)
    text = f"{label} → {targets}" if targets else f"{label} (no target)"
    return f"{text} [{guard}" if guard else text


class LogLike(Protocol):
    """What the path needs of a transition-log record
    (:class:`~django_xsm.persistence.records.TransitionRecord` has it)."""

    @property
    def seq(self) -> int: ...
    @property
    def event_type(self) -> str: ...
    @property
    def from_state(self) -> Any: ...
    @property
    def to_state(self) -> Any: ...
    @property
    def accepted(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Node:
    """A state. ``kind`` is the engine's type (atomic, compound, parallel,
    final, history); ``region`` is True for a child of a parallel state."""

    id: str
    state_id: str
    label: str
    kind: str
    parent: str | None
    children: tuple[str, ...]
    initial: str | None
    deep: bool
    region: bool
    active: bool

    @property
    def is_container(self) -> bool:
        return bool(self.children) and self.kind in ("compound", "parallel")


@dataclass(frozen=True, slots=True)
class Edge:
    """One arrow: one target of one transition (a transition with two
    targets is two arrows). A targetless transition is an arrow from its
    state to itself with ``targetless`` set. ``steps`` are the log ``seq``
    numbers of the records that took it, oldest first."""

    id: str
    source: str
    target: str
    label: str
    kind: str
    description: str
    targetless: bool = False
    steps: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Graph:
    """Nodes in document order (the root first) and edges in chart order."""

    machine_id: str
    root: str
    nodes: Mapping[str, Node]
    edges: tuple[Edge, ...]

    def ancestors(self, node_id: str) -> list[str]:
        """Proper ancestors of ``node_id``, parent first."""
        found = []
        parent = self.nodes[node_id].parent
        while parent is not None:
            found.append(parent)
            parent = self.nodes[parent].parent
        return found

    def child_towards(self, container: str, node_id: str) -> str | None:
        """The child of ``container`` that is ``node_id`` or holds it."""
        current: str | None = node_id
        while current is not None:
            parent = self.nodes[current].parent
            if parent == container:
                return current
            current = parent
        return None

    @property
    def taken(self) -> list[Edge]:
        return [e for e in self.edges if e.steps]


def ids_of_value(machine: Machine, value: Any, *, initial: bool = False) -> set[str]:
    """The full ids a state value stands for (``{"paid": "new"}`` ->
    ``{"order", "order.paid", "order.paid.new"}``). Tolerant: a key the
    chart no longer has is skipped (a record written by an older version),
    and a container named without its children counts its initial ones.
    ``initial=True`` reads a None value as the initial configuration."""
    found: set[str] = set()

    def walk(node: StateNode, sub: Any) -> None:
        found.add(node.id)
        kids = {c.key: c for c in node.regions}
        if isinstance(sub, str) and sub in kids:
            walk(kids[sub], None)
        elif isinstance(sub, Mapping):
            for key, inner in sub.items():
                if key in kids:
                    walk(kids[key], inner)
        elif node.type == "parallel":
            for kid in node.regions:
                walk(kid, None)
        elif node.type == "compound" and node.initial_node is not None:
            walk(node.initial_node, None)

    if value is not None or initial:
        walk(machine.root, value)
    return found


def _selected(
    sources: list[StateNode], event: str, before: set[str], after: set[str], *, strict: bool
) -> list[Transition]:
    """The transitions ``event`` took from ``sources`` (deepest first): the
    first candidate of each source no chosen one is below, whose targets
    are active afterwards (``strict``) or whatever they are."""
    chosen: list[Transition] = []
    for node in sources:
        if any(t.source.is_descendant_of(node) or t.source is node for t in chosen):
            continue
        for t in node.candidates(event):
            if strict and t.target_ids and not set(t.target_ids) <= after:
                continue
            if strict and not t.target_ids and before != after:
                continue
            chosen.append(t)
            break
    return chosen


def _path_steps(machine: Machine, records: Iterable[LogLike]) -> dict[Transition, list[int]]:
    """Which transitions each accepted record took, read back from its
    from/to state values and its event: the log keeps no transition ids.

    A transition counts when its source was active, it answers the event
    (wildcards included) and its targets are all active afterwards; the
    deepest source wins over its ancestors (XState's selection). Eventless
    transitions (``always``, ``onDone``) then count when their source was
    entered by the step and left again, and their targets are active.
    Guards cannot be re-evaluated (the context is not in the record): of
    two transitions with the same source, event and targets the first is
    shown, as the engine tries it first."""
    taken: dict[Transition, list[int]] = {}
    for record in records:
        if not record.accepted:
            continue
        # No from-state: the block that started the instance.
        before = ids_of_value(machine, record.from_state, initial=record.from_state is None)
        after = ids_of_value(machine, record.to_state)
        if not after:
            continue
        sources = sorted(
            (machine.get_state(i) for i in before), key=lambda n: n.depth, reverse=True
        )
        chosen = _selected(sources, record.event_type, before, after, strict=True)
        if not chosen and before != after:
            # A target left again at once (a final state's onDone, a
            # history state, an always): the event's own transition.
            chosen = _selected(sources, record.event_type, before, after, strict=False)
        entered: set[str] = set()
        for t in chosen:
            for target in t.targets or ():
                entered.add(target.id)
                entered.update(a.id for a in target.ancestors if a.id not in before)
        for _ in range(len(machine.nodes)):  # eventless steps, to a fixpoint
            more = [
                t
                for t in machine.transitions
                if t.kind in ("always", "onDone")
                and t not in chosen
                and t.target_ids
                and t.source_id not in after
                and set(t.target_ids) <= after
                and (
                    t.source_id in entered
                    or (t.kind == "onDone" and any(c.id in entered for c in t.source.children))
                )
            ]
            if not more:
                break
            for t in more:
                chosen.append(t)
                for target in t.targets or ():
                    entered.add(target.id)
        for t in chosen:
            taken.setdefault(t, []).append(record.seq)
    return taken


def chart_graph(
    machine: Machine, active: Collection[str] = (), log: Sequence[LogLike] = ()
) -> Graph:
    """The graph of ``machine``: states whose full id is in ``active``
    marked active, the transitions the records of ``log`` took carrying
    their ``seq`` numbers (:class:`Edge.steps`)."""
    ids = {n.id: f"s{i}" for i, n in enumerate(machine.nodes)}
    active_ids = set(active)
    nodes: dict[str, Node] = {}
    for n in machine.nodes:
        parent = n.parent
        nodes[ids[n.id]] = Node(
            id=ids[n.id],
            state_id=n.id,
            label=machine.id if parent is None else n.key,
            kind=n.type,
            parent=ids[parent.id] if parent is not None else None,
            children=tuple(ids[c.id] for c in n.children),
            initial=ids[n.initial_node.id] if n.initial_node is not None else None,
            deep=n.history == "deep",
            region=parent is not None and parent.type == "parallel" and n.type != "history",
            active=n.id in active_ids,
        )
    steps = _path_steps(machine, log) if log else {}
    edges: list[Edge] = []
    for t in machine.transitions:
        label = edge_label(t)
        text = f"{short_id(machine, t.source_id)}: {describe_transition(machine, t)}"
        taken = tuple(steps.get(t, ()))
        for target in t.target_ids or (t.source_id,):  # targetless: a loop on its source
            edges.append(
                Edge(
                    id=f"e{len(edges)}",
                    source=ids[t.source_id],
                    target=ids[target],
                    label=label,
                    kind=t.kind,
                    description=text,
                    targetless=not t.target_ids,
                    steps=taken,
                )
            )
    for n in machine.nodes:  # a history state's default, when it has one
        for default in n.history_target or ():
            edges.append(
                Edge(
                    id=f"e{len(edges)}",
                    source=ids[n.id],
                    target=ids[default.id],
                    label="",
                    kind="history",
                    description=f"{short_id(machine, n.id)}: default → "
                    f"{short_id(machine, default.id)}",
                )
            )
    return Graph(
        machine_id=machine.id,
        root=ids[machine.root.id],
        nodes=nodes,
        edges=tuple(edges),
    )
