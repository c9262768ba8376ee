"""State diagrams of a chart: SVG (by Graphviz or the built-in layout),
DOT and Mermaid, with an instance's active states and path.

One graph (:func:`chart_graph`) feeds every output, so they all show the
same states and arrows. The SVG is self-contained (nothing is fetched)
and every chart string in it is escaped: the admin inlines it. Used by
the admin (the XSM pages and ``StatechartAdminMixin``) and by
``manage.py xsm_graph``; it sits below both in the layers so each may
import it. ``XSM['DIAGRAM']['RENDERER']`` picks the SVG renderer
(:class:`~django_xsm.conf.values.Diagram`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from django.utils.safestring import SafeString, mark_safe

from django_xsm.conf import get_settings
from django_xsm.engine import Machine

from .dot import to_dot
from .graph import (
    Edge,
    Graph,
    LogLike,
    Node,
    chart_graph,
    describe_transition,
    edge_label,
    ids_of_value,
    short_id,
)
from .graphviz import GraphvizError, dot_binary, render_graphviz
from .mermaid import mermaid_ids, to_mermaid
from .svg import render_builtin

__all__ = [
    "RENDERERS",
    "Drawing",
    "Edge",
    "Graph",
    "GraphvizError",
    "LogLike",
    "Node",
    "chart_graph",
    "describe_transition",
    "dot_binary",
    "draw",
    "edge_label",
    "ids_of_value",
    "mermaid_ids",
    "render_builtin",
    "render_graphviz",
    "render_svg",
    "short_id",
    "to_dot",
    "to_mermaid",
]

RENDERERS = ("auto", "graphviz", "builtin")
logger = logging.getLogger("django_xsm.diagram")


@dataclass(frozen=True, slots=True)
class Drawing:
    """An SVG and who drew it; ``note`` says why Graphviz did not when it
    was asked for (``"auto"`` or ``"graphviz"``), empty otherwise."""

    svg: str
    renderer: str
    note: str = ""


def draw(graph: Graph, renderer: str | None = None) -> Drawing:
    """``graph`` as SVG by ``renderer`` (default: the setting)."""
    wanted = renderer or get_settings().diagram.renderer
    if wanted not in RENDERERS:
        raise ValueError(f"unknown diagram renderer {wanted!r}; use one of {', '.join(RENDERERS)}")
    note = ""
    if wanted != "builtin":
        binary = dot_binary()
        if binary is None:
            note = "Graphviz's dot is not on PATH"
        else:
            try:
                return Drawing(render_graphviz(graph, binary), "graphviz")
            except GraphvizError as exc:
                note = f"Graphviz failed: {exc}"
        if binary is not None or wanted == "graphviz":  # "auto" without dot: silently
            logger.warning(
                "Diagram of %s: %s; drawn with the built-in layout", graph.machine_id, note
            )
    return Drawing(render_builtin(graph), "builtin", note)


def render_svg(
    machine: Machine,
    active: Collection[str] = (),
    log: Sequence[LogLike] = (),
    *,
    renderer: str | None = None,
) -> SafeString:
    """The chart of ``machine`` as an inline ``<svg>`` element: states whose
    full id is in ``active`` highlighted, the arrows the records of ``log``
    took drawn thicker with their log numbers. Safe to inline: every chart
    string is escaped, and Graphviz's output is filtered."""
    drawing = draw(chart_graph(machine, active, log), renderer)
    return mark_safe(drawing.svg)  # every chart string in it is escaped
