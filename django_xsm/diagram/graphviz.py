"""SVG by Graphviz's ``dot`` (an optional dependency, found on PATH).

``dot -Tsvg`` runs as a subprocess with the DOT source on stdin, an
argument list (never a shell) and a timeout. Its output is not inlined as
is: it is parsed and written out again keeping only drawing elements and
attributes (:data:`ELEMENTS`, :data:`ATTRIBUTES`), every text and value
escaped, so the page gets no DOCTYPE, no links, no scripts and nothing
that fetches, whatever Graphviz (or a chart string passing through it)
produced. On the way, the elements Graphviz drew for a state or an arrow
(found by the ``id`` the DOT source gave them) get the classes and
``data-*`` attributes the admin and its tests read, and the arrows an
instance took get their order badges.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html import escape

from .dot import NBSP_W, TAKEN, badge_room, badge_width, to_dot
from .graph import Edge, Graph
from .shapes import badge_text
from .svg import edge_attrs, node_attrs, svg_open

__all__ = ["ATTRIBUTES", "ELEMENTS", "GraphvizError", "dot_binary", "render_graphviz"]

TIMEOUT_S = 10.0
ELEMENTS = frozenset({"g", "title", "polygon", "path", "ellipse", "polyline", "text", "rect"})
ATTRIBUTES = frozenset(
    {
        "points", "d", "cx", "cy", "rx", "ry", "x", "y", "width", "height", "transform",
        "fill", "stroke", "stroke-width", "stroke-dasharray", "font-family", "font-size",
        "font-weight", "font-style", "text-anchor",
    }
)  # fmt: skip
_SVG = "{http://www.w3.org/2000/svg}"
_OURS = re.compile(r"xsm-([se]\d+)")
_INITIAL = re.compile(r"xsm-s\d+-initial")
_SAFE_VALUE = re.compile(r"^[\w#.,:;%() \-]*$")


class GraphvizError(Exception):
    """``dot`` is missing, failed, timed out or wrote something unreadable."""


def dot_binary() -> str | None:
    """The path of ``dot`` on PATH, or None."""
    return shutil.which("dot")


@functools.lru_cache(maxsize=64)
def _run_dot(binary: str, source: str) -> bytes:
    # Cached by source: a page view of an unchanged chart and state does
    # not start a process again. Failures raise, so they are not cached.
    try:
        done = subprocess.run(  # an argument list: no shell
            [binary, "-Tsvg"],
            input=source.encode("utf-8"),
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GraphvizError(f"dot took longer than {TIMEOUT_S:g} s") from exc
    except OSError as exc:
        raise GraphvizError(f"dot could not be run: {exc}") from exc
    if done.returncode != 0:
        error = done.stderr.decode("utf-8", "replace").strip()[:500]
        raise GraphvizError(f"dot exited with status {done.returncode}: {error}")
    return done.stdout


def _tag(element: ET.Element) -> str:
    return element.tag[len(_SVG) :] if element.tag.startswith(_SVG) else ""


def _number(text: str | None) -> float:
    try:
        return float(text or "0")
    except ValueError:
        return 0.0


class _Writer:
    """Writes the kept elements of Graphviz's SVG, escaped."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.edges = {e.id: e for e in graph.edges}
        self.out: list[str] = []

    def element(self, element: ET.Element) -> None:
        tag = _tag(element)
        if tag not in ELEMENTS:
            return  # <a>, <defs>, <image>, <script>, anything unexpected
        ours = _OURS.fullmatch(element.get("id", ""))
        attrs = [
            f'{name}="{escape(value)}"'
            for name, value in element.attrib.items()
            if name in ATTRIBUTES and _SAFE_VALUE.match(value)
        ]
        title = ""
        if tag == "g" and ours is not None:
            item = ours.group(1)
            if item in self.graph.nodes:
                head, title = node_attrs(self.graph, self.graph.nodes[item])
            else:
                head, title = edge_attrs(self.graph, self.edges[item])
            attrs = [head, *attrs]
        elif tag == "g" and _INITIAL.fullmatch(element.get("id", "")):
            attrs = ['class="xsm-initial"', *attrs]
        self.out.append(f"<{tag}{''.join(' ' + a for a in attrs)}>")
        if title:
            self.out.append(f"<title>{escape(title)}</title>")
        if element.text and element.text.strip() and tag in ("text", "title"):
            self.out.append(escape(element.text.strip("\n")))
        for child in element:
            if tag == "g" and _tag(child) == "title":
                continue  # Graphviz's titles name its DOT ids (s3, s2_in): ours or none
            self.element(child)
        if tag == "g" and ours is not None and ours.group(1) in self.edges:
            self.badge(element, self.edges[ours.group(1)])
        self.out.append(f"</{tag}>\n" if tag == "g" else f"</{tag}>")

    def badge(self, element: ET.Element, edge: Edge) -> None:
        """The order badge of a taken arrow, in the room its label keeps
        for it (leading no-break spaces, :func:`.dot.badge_room`)."""
        text = badge_text(edge.steps)
        label = next((t for t in element.iter(f"{_SVG}text")), None)
        if not text or label is None:
            return
        content = (label.text or "").strip("\n")
        room = badge_room(edge.steps)
        # Graphviz centres the text on x; 5.5 is Helvetica's mean advance at 10pt
        width = room * NBSP_W + (len(content) - room) * 5.5
        w = badge_width(edge.steps)
        left, y = _number(label.get("x")) - width / 2, _number(label.get("y")) - 4
        self.out.append(
            f'<g class="xsm-step-badge"><rect x="{left:.1f}" y="{y - 8:.1f}" width="{w:.1f}" '
            f'height="16" rx="8" fill="{TAKEN}"/><text x="{left + w / 2:.1f}" y="{y + 4:.1f}" '
            f'text-anchor="middle" font-size="10" font-weight="bold" fill="#ffffff">'
            f"{escape(text)}</text></g>"
        )


def render_graphviz(graph: Graph, binary: str | None = None) -> str:
    """The SVG markup of ``graph`` drawn by ``dot`` (``binary`` or the one
    on PATH); raises :class:`GraphvizError` when it cannot be."""
    found = binary or dot_binary()
    if found is None:
        raise GraphvizError("Graphviz's dot is not on PATH")
    try:
        raw = _run_dot(found, to_dot(graph))
    except GraphvizError as first:
        try:
            raw = _run_dot(found, to_dot(graph, clip=False))
        except GraphvizError:
            raise first from None
    try:
        root = ET.fromstring(raw)  # our dot's output, re-filtered below
    except ET.ParseError as exc:
        raise GraphvizError(f"dot wrote SVG that does not parse: {exc}") from exc
    if _tag(root) != "svg":
        raise GraphvizError("dot wrote something that is not SVG")
    box = [_number(v) for v in (root.get("viewBox") or "0 0 0 0").split()]
    width, height = (box[2], box[3]) if len(box) == 4 else (0.0, 0.0)
    writer = _Writer(graph)
    for child in root:
        writer.element(child)
    body = "".join(writer.out)
    return f"{svg_open(graph, width, height, renderer='graphviz')}\n{body}\n</svg>"
