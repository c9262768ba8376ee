"""An arrow through nested boxes, as one chain per container it crosses.

The built-in layout draws each container's inside on its own (see
:mod:`.rows`), so an arrow between two states is cut where it crosses a
container's border. Its *own* container is the innermost one holding
both ends; there the chain runs from the child holding the source to the
child holding the target, and carries the label. Below it, on the
source's side, each container the arrow leaves holds a chain from the
child holding the source to its own border; on the target's side each
container it enters holds one from its border to the child holding the
target. A container that is itself an end of the arrow (or the target
of its parent's initial dot) keeps a slot on its border for it.

Which border (``top`` or ``bottom``) is decided once, in the arrow's own
container: an arrow to a lower row leaves by the bottom and enters by
the top, one to a higher row the other way round, one within a row
leaves and enters by the bottom; every container below follows. So the
chains of one arrow meet at the same point of each border they cross.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from .graph import Graph
from .shapes import label_size

__all__ = ["BOTTOM", "DOT", "TOP", "Chain", "End", "Split", "split"]

TOP, BOTTOM, DOT = "top", "bottom", "dot"


@dataclass(frozen=True, slots=True)
class End:
    """An end of a chain: a child of the container joined on ``side``, or
    (``node`` None) the container's own border on ``side`` — its initial
    dot for ``DOT``."""

    node: str | None
    side: str


@dataclass(frozen=True, slots=True)
class Chain:
    """A piece of arrow ``key`` (an edge id, or ``init:<container>`` for
    an initial dot's arrow) inside one container; ``label`` is the width
    of the label it carries (0: none)."""

    key: str
    start: End
    end: End
    label: float = 0.0


@dataclass(slots=True)
class Split:
    """Every arrow cut into chains: the chains of each container, the
    arrows crossing each container's border (key, side), and for each
    edge the containers of its chains from its source to its target."""

    chains: dict[str, list[Chain]] = field(default_factory=lambda: defaultdict(list))
    borders: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    through: dict[str, list[str]] = field(default_factory=dict)


def split(graph: Graph, level: Mapping[str, float]) -> Split:
    """The chains of every arrow but self-loops; ``level`` is the row of
    each state within its parent (:func:`.rows.levels`)."""
    out = Split()
    for node in graph.nodes.values():
        if node.kind == "compound" and node.is_container and node.initial is not None:
            key = f"init:{node.id}"
            out.chains[node.id].append(Chain(key, End(None, DOT), End(node.initial, TOP)))
            out.borders[node.id].append((key, DOT))
            if graph.nodes[node.initial].is_container:
                out.borders[node.initial].append((key, TOP))
    for e in graph.edges:
        if e.source == e.target:
            continue
        s, t = e.source, e.target
        up_s = [s, *graph.ancestors(s)]
        up_t = [t, *graph.ancestors(t)]
        own = next(n for n in up_s if n in up_t)
        a = None if own == s else graph.child_towards(own, s)
        b = None if own == t else graph.child_towards(own, t)
        if a is None:
            sides = (TOP, TOP)
        elif b is None:
            sides = (BOTTOM, BOTTOM)
        elif level[a] < level[b]:
            sides = (BOTTOM, TOP)
        elif level[a] > level[b]:
            sides = (TOP, BOTTOM)
        else:
            sides = (BOTTOM, BOTTOM)
        leave, enter = sides
        width = label_size(e)[0] if e.label else 0.0
        out.chains[own].append(Chain(e.id, End(a, leave), End(b, enter), width))
        if a is None:
            out.borders[own].append((e.id, leave))
        if b is None:
            out.borders[own].append((e.id, enter))
        exits = up_s[1 : up_s.index(own)]
        for box in exits:  # innermost first
            out.chains[box].append(
                Chain(e.id, End(graph.child_towards(box, s), leave), End(None, leave))
            )
            out.borders[box].append((e.id, leave))
        entries = up_t[1 : up_t.index(own)][::-1]
        for box in entries:  # outermost first
            out.chains[box].append(
                Chain(e.id, End(None, enter), End(graph.child_towards(box, t), enter))
            )
            out.borders[box].append((e.id, enter))
        if s != own and graph.nodes[s].is_container:
            out.borders[s].append((e.id, leave))
        if t != own and graph.nodes[t].is_container:
            out.borders[t].append((e.id, enter))
        out.through[e.id] = [*exits, own, *entries]
    return out
