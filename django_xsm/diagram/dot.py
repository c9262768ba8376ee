"""The chart as Graphviz DOT source: compound and parallel states are
clusters, the rest are nodes.

DOT needs no Graphviz binary to write (``xsm_graph --format dot``); the
SVG renderer (:mod:`.graphviz`) feeds this text to ``dot``. Identifiers
are the graph's positional ids (``s3``); chart strings appear only inside
quoted labels, escaped by :func:`quote`, so a state named ``"]; x -> y``
stays a label. Each cluster and node gets ``id="xsm-<id>"`` and each edge
``id="xsm-<edge id>"``: the SVG renderer finds its elements by them.
"""

from __future__ import annotations

import math

from .graph import Edge, Graph, Node
from .shapes import badge_text

__all__ = ["ACTIVE", "NBSP", "NBSP_W", "TAKEN", "badge_room", "badge_width", "quote", "to_dot"]

FONT = "Helvetica"
ACTIVE = {"fill": "#bfe9c9", "stroke": "#1b7f3b", "container": "#f2faf3"}
TAKEN = "#1f6feb"
PLAIN = {"fill": "#ffffff", "stroke": "#8a949e", "container": "#f6f8fa"}
NBSP = "\u00a0"  # not collapsed by SVG, measured by Graphviz like a space
NBSP_W = 2.78  # its advance at 10pt Helvetica


def badge_width(steps: tuple[int, ...]) -> float:
    """The width of a taken arrow's order badge in Graphviz's SVG."""
    return max(16.0, len(badge_text(steps)) * 6.0 + 8)


def badge_room(steps: tuple[int, ...]) -> int:
    """How many no-break spaces before a taken arrow's label hold its badge."""
    return math.ceil((badge_width(steps) + 4) / NBSP_W)


def quote(text: str) -> str:
    """``text`` as a DOT double-quoted string. Backslashes are doubled (DOT
    reads ``\\n``, ``\\l``, ``\\N`` as escapes), quotes escaped, ``&`` written
    ``&amp;`` (Graphviz decodes entities in labels), line breaks made
    spaces: nothing in a chart string can close the string or turn into a
    Graphviz escape, and it is drawn as written."""
    cleaned = "".join(" " if c in "\r\n\t\v\f" or ord(c) < 32 else c for c in text)
    cleaned = cleaned.replace("&", "&amp;").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{cleaned}"'


def _attrs(**values: str | float) -> str:
    parts = []
    for name, value in values.items():
        text = value if isinstance(value, str) else f"{value:g}"
        parts.append(f"{name}={quote(text)}")
    return "[" + ", ".join(parts) + "]"


def _anchor(graph: Graph, node_id: str) -> str:
    """The DOT node an edge to or from ``node_id`` attaches to: the node
    itself, or for a cluster its initial dot (its invisible anchor when it
    has none)."""
    return f"{node_id}_in" if graph.nodes[node_id].is_container else node_id


def _leaf(node: Node) -> str:
    colors = ACTIVE if node.active and node.parent is not None else PLAIN
    width = 2.5 if node.active else 1.2
    common: dict[str, str | float] = {
        "id": f"xsm-{node.id}",
        "fillcolor": colors["fill"],
        "color": colors["stroke"],
        "penwidth": width,
    }
    if node.kind == "history":
        label = "H*" if node.deep else "H"
        return f"{node.id} " + _attrs(
            label=label, shape="circle", style="filled", width=0.36, fixedsize="true", **common
        )
    if node.kind == "final":
        return f"{node.id} " + _attrs(
            label=node.label, shape="box", style="filled", peripheries=2, **common
        )
    return f"{node.id} " + _attrs(label=node.label, shape="box", style="rounded,filled", **common)


def _cluster(graph: Graph, node: Node, depth: int) -> list[str]:
    pad = "  " * depth
    lit = node.active and node.parent is not None
    colors = ACTIVE if lit else PLAIN
    dashed = node.region
    style = "dashed,filled" if dashed else "rounded,filled"
    lines = [
        f"{pad}subgraph cluster_{node.id} {{",
        f"{pad}  "
        + " ".join(
            f"{k}={quote(v)};"
            for k, v in {
                "id": f"xsm-{node.id}",
                "label": node.label,
                "labeljust": "l",
                "style": style,
                "fillcolor": colors["container"] if node.parent is not None else "#ffffff",
                "color": colors["stroke"],
                "penwidth": "2.5" if lit else "1.2",
                "fontname": f"{FONT}-Bold",
            }.items()
        ),
    ]
    if node.kind == "compound" and node.initial is not None:
        lines.append(
            f"{pad}  {node.id}_in "
            + _attrs(shape="point", width=0.13, color="#333333", id=f"xsm-{node.id}-initial")
        )
        target = _anchor(graph, node.initial)
        lhead = f", lhead=cluster_{node.initial}" if graph.nodes[node.initial].is_container else ""
        lines.append(f'{pad}  {node.id}_in -> {target} [arrowsize=0.7, color="#333333"{lhead}]')
    else:
        lines.append(f'{pad}  {node.id}_in [shape=point, style=invis, width=0.01, label=""]')
    for child in node.children:
        kid = graph.nodes[child]
        if kid.is_container:
            lines.extend(_cluster(graph, kid, depth + 1))
        else:
            lines.append(f"{pad}  {_leaf(kid)}")
    lines.append(f"{pad}}}")
    return lines


def _edge(graph: Graph, edge: Edge, clip: bool) -> str:
    source, target = graph.nodes[edge.source], graph.nodes[edge.target]
    values: dict[str, str | float] = {"id": f"xsm-{edge.id}", "label": f" {edge.label} "}
    if edge.steps:  # room for the order badge the SVG renderer draws before the label
        values["label"] = NBSP * badge_room(edge.steps) + f"{edge.label} "
    if not edge.label:
        del values["label"]
    # Clip at a cluster's border, unless one end lies inside the other
    # (Graphviz cannot clip an edge at a cluster it starts in).
    inside = edge.source in graph.ancestors(edge.target) or edge.target in graph.ancestors(
        edge.source
    )
    clip = clip and not inside and edge.source != edge.target
    if clip and source.is_container:
        values["ltail"] = f"cluster_{source.id}"
    if clip and target.is_container:
        values["lhead"] = f"cluster_{target.id}"
    if edge.kind == "history" or edge.targetless:
        values["style"] = "dashed"
    if edge.kind == "history":
        values["color"] = "#8a949e"
    if edge.steps:
        values.update(penwidth=2.6, color=TAKEN, fontcolor=TAKEN)
    return f"  {_anchor(graph, edge.source)} -> {_anchor(graph, edge.target)} {_attrs(**values)}"


def to_dot(graph: Graph, *, clip: bool = True) -> str:
    """The DOT source of ``graph``, top to bottom. With ``clip`` an arrow
    to or from a container ends at its border (``lhead``/``ltail`` with
    ``compound=true``); without, at the container's initial dot or anchor
    (the SVG renderer's second try: some Graphviz versions abort on a
    clipped arrow they cannot route)."""
    root = graph.nodes[graph.root]
    lines = [
        f"digraph {quote(graph.machine_id)} {{",
        "  graph [rankdir=TB, compound=true, nodesep=0.45, ranksep=0.5, "
        f'fontname="{FONT}", fontsize=12, pad=0.1];',
        f'  node [fontname="{FONT}", fontsize=12, height=0.36, margin="0.14,0.06"];',
        f'  edge [fontname="{FONT}", fontsize=10, color="#5b6670", fontcolor="#2f3a44", '
        "arrowsize=0.75];",
        *_cluster(graph, root, 1),
        *(_edge(graph, e, clip) for e in graph.edges),
        "}",
    ]
    return "\n".join(lines) + "\n"
