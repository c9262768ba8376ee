"""The built-in layout and its SVG: every state and arrow drawn, arrows
from border to border, siblings side by side without overlapping,
children inside their parents, and every chart string escaped."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from django_xsm.diagram import chart_graph, render_builtin
from django_xsm.diagram.graph import Graph
from django_xsm.diagram.layout import layout
from django_xsm.diagram.shapes import Rect
from django_xsm.engine import Machine
from tests.diagram.charts import compound, history, hostile, parallel
from tests.diagram.support import walk

SVG = "{http://www.w3.org/2000/svg}"
CHARTS = {"compound": compound, "parallel": parallel, "history": history, "hostile": hostile}


def on_border(graph: Graph, box: Rect, node_id: str, point: tuple[float, float]) -> bool:
    x, y = point
    if graph.nodes[node_id].kind == "history":
        return abs(math.dist((box.cx, box.cy), point) - box.w / 2) < 1.5
    inside = box.x - 1.5 <= x <= box.right + 1.5 and box.y - 1.5 <= y <= box.bottom + 1.5
    deep = box.x + 1.5 < x < box.right - 1.5 and box.y + 1.5 < y < box.bottom - 1.5
    return inside and not deep


def contains(outer: Rect, inner: Rect) -> bool:
    return (
        outer.x < inner.x
        and inner.right < outer.right
        and outer.y < inner.y
        and inner.bottom < outer.bottom
    )


@pytest.mark.parametrize("name", CHARTS)
def test_boxes_nest_and_siblings_do_not_overlap(name: str) -> None:
    graph = chart_graph(CHARTS[name])
    found = layout(graph)
    assert set(found.boxes) == set(graph.nodes)
    for node in graph.nodes.values():
        kids = [found.boxes[c] for c in node.children]
        for kid in kids:
            assert contains(found.boxes[node.id], kid), (node.label, kid)
        for i, a in enumerate(kids):
            for b in kids[i + 1 :]:
                assert not a.overlaps(b), (node.label, a, b)
    assert all(b.right <= found.width and b.bottom <= found.height for b in found.boxes.values())


@pytest.mark.parametrize("name", CHARTS)
def test_every_arrow_runs_from_its_source_to_its_target(name: str) -> None:
    graph = chart_graph(CHARTS[name])
    found = layout(graph)
    assert [r.edge.id for r in found.routes] == [e.id for e in graph.edges]
    for route in found.routes:
        e = route.edge
        assert len(route.points) >= 2
        assert on_border(graph, found.boxes[e.source], e.source, route.points[0]), route
        assert on_border(graph, found.boxes[e.target], e.target, route.points[-1]), route
        if e.label:
            assert route.label is not None and route.label.w > len(e.label) * 6
    leaves = [found.boxes[n.id] for n in graph.nodes.values() if not n.is_container]
    for route in found.routes:  # no label hides a state
        if route.label is not None:
            assert not any(route.label.overlaps(leaf) for leaf in leaves), route


def _svg(machine: Machine, *events: str) -> tuple[str, ET.Element]:
    ids, log = walk(machine, *events)
    text = render_builtin(chart_graph(machine, ids, log))
    return text, ET.fromstring(text)  # well-formed XML


def _groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if cls in (g.get("class") or "").split()]


def test_the_svg_draws_every_state_and_arrow_of_a_compound_chart() -> None:
    text, root = _svg(compound, "CHECKOUT", "NEXT")
    assert text.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="xsm-diagram" ')
    assert root.get("data-renderer") == "builtin"
    states = {g.get("data-state-id"): g for g in _groups(root, "xsm-state")}
    assert set(states) == {n.id for n in compound.nodes}
    edges = _groups(root, "xsm-edge")
    assert len(edges) == len(chart_graph(compound).edges)
    for g in edges:  # a line and an arrowhead each
        assert g.find(f"{SVG}polyline") is not None
        assert g.find(f"{SVG}polygon[@class='xsm-arrowhead']") is not None
    labels = sorted(
        t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "xsm-edge-label"
    )
    assert "CHECKOUT [hasItems]" in labels and "after 60000" in labels and "onDone" in labels
    assert len(_groups(root, "xsm-initial")) == 3  # store, checkout, paid
    finals = [g for g in states.values() if "xsm-final" in (g.get("class") or "")]
    assert len(finals) == 4 and all(
        g.find(f"{SVG}rect[@class='xsm-final-inner']") is not None for g in finals
    )
    # the active configuration: the leaf filled, its container outlined, the root plain
    active = [g.get("data-state-id") for g in _groups(root, "xsm-active")]
    assert active == ["store.checkout", "store.checkout.payment"]
    assert states["store.checkout.payment"].find(f"{SVG}rect").get("fill") == "#bfe9c9"  # type: ignore[union-attr]
    assert states["store"].get("data-active") == "true" and "xsm-active" not in (
        states["store"].get("class") or ""
    )
    # the path: two arrows taken, numbered by their log records
    taken = {g.get("data-source"): g for g in _groups(root, "xsm-taken")}
    assert set(taken) == {"store.cart", "store.checkout.address"}
    assert taken["store.cart"].get("data-steps") == "1"
    badge = taken["store.checkout.address"].find(f"{SVG}g[@class='xsm-step-badge']/{SVG}text")
    assert badge is not None and badge.text == "2"
    assert "(taken: #2)" in (taken["store.checkout.address"].findtext(f"{SVG}title") or "")


def test_parallel_regions_stand_side_by_side_with_a_dashed_separator() -> None:
    _, root = _svg(parallel, "BULLETS")
    boxes = layout(chart_graph(parallel)).boxes
    bold, listing = (boxes[n.id] for n in chart_graph(parallel).nodes.values() if n.region)
    assert bold.right < listing.x and bold.y == listing.y and bold.h == listing.h
    separators = [e for e in root.iter(f"{SVG}line") if e.get("class") == "xsm-region-separator"]
    assert len(separators) == 1 and separators[0].get("stroke-dasharray")
    x = float(separators[0].get("x1") or 0)
    assert bold.right < x < listing.x


def test_history_states_are_circles_marked_h_and_h_star() -> None:
    _, root = _svg(history, "PAUSE", "POWER", "POWER")
    marks = {
        g.get("data-state-id"): g.findtext(f"{SVG}text")
        for g in _groups(root, "xsm-history")
        if g.find(f"{SVG}circle") is not None
    }
    assert marks == {"player.on.hist": "H*", "player.on.shallow": "H"}
    taken = {g.get("data-target"): g.get("data-steps") for g in _groups(root, "xsm-taken")}
    assert taken == {"player.on.paused": "1", "player.off": "2", "player.on.hist": "3"}


def test_every_chart_string_is_escaped() -> None:
    text, root = _svg(hostile)
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;a()&lt;/script&gt;" in text and "x&amp;y" in text
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in text
    assert {g.get("data-state-id") for g in _groups(root, "xsm-state")} >= {
        "evil.<script>a()</script>",
        'evil.x&y.end"} state X {',
    }
    # nothing in it fetches: no URL but the SVG namespace
    assert "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "href" not in text and "url(" not in text


def test_the_aria_label_names_the_active_states() -> None:
    _, root = _svg(parallel)
    assert root.get("aria-label") == (
        "State diagram of editor; active: editing, editing.bold, editing.bold.off, "
        "editing.list, editing.list.none"
    )
