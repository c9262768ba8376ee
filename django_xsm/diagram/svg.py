"""The SVG of the built-in layout, and the markup both renderers share.

Both renderers mark a state's group the same way (``class="xsm-state
xsm-<kind>[ xsm-active]"``, ``data-state-id``, ``data-active``) and an
arrow's (``class="xsm-edge xsm-edge-<kind>[ xsm-taken]"``,
``data-source``, ``data-target``, ``data-steps``), so the admin's styles
and tests do not care which one drew the chart. Every chart string goes
through :func:`html.escape` (quotes included) on its way into a text node
or an attribute: the SVG is inlined in the admin page. Arrowheads are
polygons, not ``<marker>`` references, so two diagrams on one page share
no element ids.
"""

from __future__ import annotations

import math
from html import escape

from .dot import ACTIVE, PLAIN, TAKEN
from .graph import Edge, Graph, Node
from .layout import layout
from .shapes import HEAD, LABEL_H, PADX, Layout, Point, Rect, Route, badge_text, label_size

__all__ = ["badge_text", "edge_attrs", "node_attrs", "render_builtin", "svg_open"]

FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace"
EDGE = "#5b6670"


def node_attrs(graph: Graph, node: Node) -> tuple[str, str]:
    """The attributes of a state's ``<g>`` (class first) and its title."""
    lit = node.active and node.parent is not None  # the root is always active
    classes = f"xsm-state xsm-{node.kind}" + (" xsm-active" if lit else "")
    attrs = (
        f'class="{escape(classes)}" data-state-id="{escape(node.state_id)}" '
        f'data-active="{"true" if node.active else "false"}"'
    )
    kind = f"{node.kind}, deep" if node.kind == "history" and node.deep else node.kind
    return attrs, f"{node.state_id} ({kind}{', active' if node.active else ''})"


def edge_attrs(graph: Graph, edge: Edge) -> tuple[str, str]:
    """The attributes of an arrow's ``<g>`` and its title (the transition
    written out, and when the instance took it)."""
    classes = f"xsm-edge xsm-edge-{edge.kind}" + (" xsm-taken" if edge.steps else "")
    source, target = graph.nodes[edge.source], graph.nodes[edge.target]
    attrs = (
        f'class="{escape(classes)}" data-edge-id="{edge.id}" '
        f'data-source="{escape(source.state_id)}" data-target="{escape(target.state_id)}" '
        f'data-steps="{" ".join(str(s) for s in edge.steps)}"'
    )
    title = edge.description
    if edge.steps:
        title += " (taken: " + ", ".join(f"#{s}" for s in edge.steps) + ")"
    return attrs, title


def svg_open(graph: Graph, width: float, height: float, *, renderer: str) -> str:
    """The ``<svg>`` start tag: sized by its ``viewBox`` (it scales down with
    ``max-width: 100%``), labelled for screen readers."""
    head = f"{graph.machine_id}."
    names = ", ".join(
        n.state_id.removeprefix(head) for n in graph.nodes.values() if n.active and n.parent
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="xsm-diagram" role="img" '
        f'data-renderer="{renderer}" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.1f} {height:.1f}" font-family="{escape(FONT)}" font-size="12" '
        f'aria-label="State diagram of {escape(graph.machine_id)}; active: '
        f'{escape(names or "none")}">'
    )


def _arrowhead(tip: Point, tail: Point, color: str, size: float = 9.0) -> str:
    angle = math.atan2(tip[1] - tail[1], tip[0] - tail[0])
    left = (tip[0] - size * math.cos(angle - 0.42), tip[1] - size * math.sin(angle - 0.42))
    right = (tip[0] - size * math.cos(angle + 0.42), tip[1] - size * math.sin(angle + 0.42))
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (tip, left, right))
    return f'<polygon class="xsm-arrowhead" points="{pts}" fill="{color}"/>'


class _Drawer:
    def __init__(self, graph: Graph, found: Layout) -> None:
        self.g = graph
        self.lay = found
        self.out: list[str] = []

    def node(self, node: Node) -> None:
        box = self.lay.boxes[node.id]
        lit = node.active and node.parent is not None
        colors = ACTIVE if lit else PLAIN
        attrs, title = node_attrs(self.g, node)
        self.out += [f"<g {attrs}>", f"<title>{escape(title)}</title>"]
        stroke, width = colors["stroke"], "2.5" if lit else "1.2"
        if node.kind == "history":
            r = box.w / 2
            self.out.append(
                f'<circle cx="{box.cx:.1f}" cy="{box.cy:.1f}" r="{r:.1f}" fill="{colors["fill"]}" '
                f'stroke="{stroke}" stroke-width="{width}"/>'
            )
            self.out.append(
                f'<text x="{box.cx:.1f}" y="{box.cy + 4:.1f}" text-anchor="middle" '
                f'font-weight="bold" class="xsm-label">{"H*" if node.deep else "H"}</text>'
            )
            self.out.append("</g>")
            return
        container = node.is_container
        fill = colors["container"] if container else colors["fill"]
        if node.parent is None:
            fill = "#ffffff"
        if node.region:  # a region: no border of its own, dashed lines between
            stroke, width = ("#1b7f3b", "1.5") if lit else ("none", "0")
        dash = ' stroke-dasharray="3 3"' if node.region and lit else ""
        self.out.append(
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
            f'rx="{3 if node.region else 7}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{width}"{dash}/>'
        )
        if node.kind == "final":
            self.out.append(
                f'<rect class="xsm-final-inner" x="{box.x + 3.5:.1f}" y="{box.y + 3.5:.1f}" '
                f'width="{box.w - 7:.1f}" height="{box.h - 7:.1f}" rx="4" fill="none" '
                f'stroke="{stroke}" stroke-width="1"/>'
            )
        y = box.y + HEAD / 2 + 5 if container else box.y + min(box.h, 30) / 2 + 4
        self.out.append(
            f'<text x="{box.x + PADX:.1f}" y="{y:.1f}" '
            f'font-weight="{"bold" if container or node.active else "normal"}" '
            f'class="xsm-label">{escape(node.label)}</text>'
        )
        for sep_of, x, y1, y2 in self.lay.separators:
            if sep_of == node.id:
                self.out.append(
                    f'<line class="xsm-region-separator" x1="{x:.1f}" y1="{y1:.1f}" '
                    f'x2="{x:.1f}" y2="{y2:.1f}" stroke="#8a949e" stroke-width="1.2" '
                    f'stroke-dasharray="6 4"/>'
                )
        for init_of, points in self.lay.initials:
            if init_of == node.id:
                dot, end = points[0], points[-1]
                pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
                self.out.append(
                    f'<g class="xsm-initial"><circle cx="{dot[0]:.1f}" cy="{dot[1]:.1f}" r="5" '
                    f'fill="#333333"/><polyline points="{pts}" fill="none" stroke="#333333" '
                    f'stroke-width="1.3"/>{_arrowhead(end, points[-2], "#333333", 7)}</g>'
                )
        for child in node.children:
            self.node(self.g.nodes[child])
        self.out.append("</g>")

    def edge(self, route: Route) -> None:
        e = route.edge
        attrs, title = edge_attrs(self.g, e)
        color = TAKEN if e.steps else ("#8a949e" if e.kind == "history" else EDGE)
        width = 2.8 if e.steps else 1.3
        dash = ' stroke-dasharray="5 3"' if e.targetless or e.kind == "history" else ""
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in route.points)
        self.out += [f"<g {attrs}>", f"<title>{escape(title)}</title>"]
        self.out.append(
            f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{width}"'
            f'{dash} stroke-linejoin="round"/>'
        )
        self.out.append(_arrowhead(route.points[-1], route.points[-2], color))
        if route.label is not None:
            self.label(e, route.label)
        self.out.append("</g>")

    def label(self, e: Edge, spot: Rect) -> None:
        _, badge_w = label_size(e)
        self.out.append(
            f'<rect class="xsm-edge-label-bg" x="{spot.x:.1f}" y="{spot.y:.1f}" '
            f'width="{spot.w:.1f}" height="{spot.h:.1f}" rx="3" fill="#ffffff" '
            f'fill-opacity="0.9"/>'
        )
        x = spot.x
        if badge_w:
            self.out.append(
                f'<g class="xsm-step-badge"><rect x="{x:.1f}" y="{spot.y:.1f}" '
                f'width="{badge_w:.1f}" '
                f'height="{LABEL_H:.1f}" rx="7.5" fill="{TAKEN}"/><text x="{x + badge_w / 2:.1f}" '
                f'y="{spot.y + 11:.1f}" text-anchor="middle" font-size="10" font-weight="bold" '
                f'fill="#ffffff">{escape(badge_text(e.steps))}</text></g>'
            )
            x += badge_w + 3
        if e.label:
            text_color = TAKEN if e.steps else "#2f3a44"
            self.out.append(
                f'<text class="xsm-edge-label" x="{x + 4:.1f}" y="{spot.y + 11:.1f}" '
                f'font-size="11" fill="{text_color}">{escape(e.label)}</text>'
            )


def render_builtin(graph: Graph) -> str:
    """The SVG markup of ``graph`` in the built-in layout."""
    found = layout(graph)
    drawer = _Drawer(graph, found)
    drawer.node(graph.nodes[graph.root])
    drawer.out.append('<g class="xsm-edges">')
    # taken arrows last: on top of the others
    for route in sorted(found.routes, key=lambda r: bool(r.edge.steps)):
        drawer.edge(route)
    drawer.out.append("</g>")
    body = "\n".join(drawer.out)
    return f"{svg_open(graph, found.width, found.height, renderer='builtin')}\n{body}\n</svg>"
