"""The two rules of the built-in layout, as geometry over its result:
no arrow's label lies over a state's box, and no arrow runs through a
box it does not connect.

An arrow connects its source's and its target's boxes and their
ancestors (a container holding both ends is one of them). Everything
else is an obstacle: a label may not overlap a leaf's box (history
circles included, by their bounding square), may not straddle a
container's border and may not cover a container's title; a segment of
an arrow may not enter an obstacle's box (a tolerance of
:data:`TOLERANCE` px at the borders, where the arrow's ends touch them).
"""

from __future__ import annotations

from dataclasses import dataclass

from django_xsm.diagram.graph import Graph
from django_xsm.diagram.shapes import HEAD, Layout, Point, Rect

TOLERANCE = 1.0


@dataclass(frozen=True)
class Fault:
    rule: str
    edge: str
    box: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.edge} vs {self.box} ({self.detail})"


def connected(graph: Graph, source: str, target: str) -> set[str]:
    """The boxes an arrow from ``source`` to ``target`` may cross."""
    return {source, target, *graph.ancestors(source), *graph.ancestors(target)}


def shrunk(box: Rect, by: float) -> Rect:
    return Rect(box.x + by, box.y + by, box.w - 2 * by, box.h - 2 * by)


def inside(outer: Rect, inner: Rect) -> bool:
    return (
        outer.x <= inner.x
        and inner.right <= outer.right
        and outer.y <= inner.y
        and inner.bottom <= outer.bottom
    )


def segment_hits(a: Point, b: Point, box: Rect) -> bool:
    """Whether the segment from ``a`` to ``b`` has a point strictly inside ``box``
    (Liang-Barsky clipping against the open rectangle)."""
    t0, t1 = 0.0, 1.0
    dx, dy = b[0] - a[0], b[1] - a[1]
    for p, q in (
        (-dx, a[0] - box.x),
        (dx, box.right - a[0]),
        (-dy, a[1] - box.y),
        (dy, box.bottom - a[1]),
    ):
        if p == 0:
            if q <= 0:
                return False
            continue
        r = q / p
        if p < 0:
            t0 = max(t0, r)
        else:
            t1 = min(t1, r)
        if t0 >= t1:
            return False
    return t1 - t0 > 1e-9


def label_faults(graph: Graph, found: Layout) -> list[Fault]:
    """Labels over a box: on a leaf, across a container's border, or over
    its title."""
    faults = []
    for route in found.routes:
        label = route.label
        if label is None:
            continue
        for node_id, box in found.boxes.items():
            node = graph.nodes[node_id]
            if not label.overlaps(box):
                continue
            if node.is_container:
                body = Rect(box.x, box.y + HEAD, box.w, box.h - HEAD)
                if inside(body, label):
                    continue
                why = "over its title" if inside(box, label) else "across its border"
            else:
                why = "over the state"
            faults.append(Fault("label", route.edge.id, node.label, f"{why}: {label} {box}"))
    return faults


def segment_faults(graph: Graph, found: Layout) -> list[Fault]:
    """Segments of an arrow inside a box the arrow does not connect."""
    faults = []
    for route in found.routes:
        e = route.edge
        allowed = connected(graph, e.source, e.target)
        for node_id, box in found.boxes.items():
            if node_id in allowed:
                continue
            core = shrunk(box, TOLERANCE)
            for a, b in zip(route.points, route.points[1:], strict=False):
                if segment_hits(a, b, core):
                    detail = f"{a}->{b} through {box}"
                    faults.append(Fault("segment", e.id, graph.nodes[node_id].label, detail))
                    break
    return faults


def faults(graph: Graph, found: Layout) -> list[Fault]:
    return label_faults(graph, found) + segment_faults(graph, found)
