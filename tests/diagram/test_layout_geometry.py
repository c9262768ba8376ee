"""The built-in layout's two promises, checked on its geometry: no label
over a state's box, no arrow through a box it does not connect (see
:mod:`tests.diagram.geometry`). On charts of every shape (compound,
parallel, history, self-loops, 15 states with crossing arrows, the
ticket chart a new user drew, hostile names), with and without a path
(its badges widen labels), and on charts hypothesis makes up. Labels
also keep clear of each other and of every arrow."""

from __future__ import annotations

import dataclasses
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_xsm.diagram import chart_graph
from django_xsm.diagram.graph import Graph
from django_xsm.diagram.layout import layout
from django_xsm.diagram.shapes import Layout, Rect
from django_xsm.engine import Machine, MachineLogic, create_machine
from tests.diagram import charts
from tests.diagram.geometry import faults, segment_hits
from tests.diagram.support import walk

#: chart -> events walked for a path
SHAPES: dict[str, tuple[Machine, tuple[str, ...]]] = {
    "compound": (charts.compound, ("CHECKOUT", "NEXT", "RETRY", "PAY")),
    "parallel": (charts.parallel, ("TOGGLE_BOLD", "BULLETS", "NONE", "NUMBERS")),
    "history": (charts.history, ("FAST", "PAUSE", "POWER", "POWER")),
    "loops": (charts.loops, ("TICK", "PING", "GO", "STEP", "RETRY", "PAUSE")),
    "crossing": (charts.crossing, ("NEXT_0", "JUMP_1", "NEXT_4", "JUMP_5", "NEXT_8")),
    "ticket": (charts.ticket, ("ASSIGN", "UNASSIGN")),
    "hostile": (charts.hostile, ()),
}


def clear_of_each_other(found: Layout) -> list[str]:
    """Labels that overlap another label, or an arrow that crosses a
    label not its own."""
    problems = []
    labelled = [r for r in found.routes if r.label is not None]
    for a, b in itertools.combinations(labelled, 2):
        assert a.label is not None and b.label is not None
        if a.label.overlaps(b.label):
            problems.append(f"labels of {a.edge.id} and {b.edge.id} overlap")
    for route in found.routes:
        for other in labelled:
            if other is route:
                continue
            assert other.label is not None
            core = Rect(other.label.x + 1, other.label.y + 1, other.label.w - 2, other.label.h - 2)
            if any(segment_hits(p, q, core) for p, q in itertools.pairwise(route.points)):
                problems.append(f"{route.edge.id} crosses the label of {other.edge.id}")
    return problems


def check(graph: Graph) -> Layout:
    found = layout(graph)
    assert [r.edge.id for r in found.routes] == [e.id for e in graph.edges]
    assert not faults(graph, found), "\n".join(str(f) for f in faults(graph, found))
    assert not clear_of_each_other(found), clear_of_each_other(found)
    for route in found.routes:
        assert len(route.points) >= 2
        assert (route.label is not None) == bool(route.edge.label or route.edge.steps)
    right = max(b.right for b in found.boxes.values())
    labels = [r.label for r in found.routes if r.label is not None]
    assert right <= found.width and all(lb.right <= found.width for lb in labels)
    assert all(lb.x >= 0 and lb.y >= 0 and lb.bottom <= found.height for lb in labels)
    return found


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("path", [False, True], ids=["chart", "with-path"])
def test_no_label_over_a_box_and_no_arrow_through_one(name: str, path: bool) -> None:
    machine, events = SHAPES[name]
    ids, log = walk(machine, *events) if path else ((), [])
    graph = chart_graph(machine, ids, log)
    if path:
        assert any(e.steps for e in graph.edges) or not events
    check(graph)


def test_the_new_users_ticket_chart_keeps_its_labels_off_the_states() -> None:
    """The report: ``ASSIGN [hasAssignee]`` was drawn across escalated
    and assigned, and an arrow ran through assigned."""
    graph = chart_graph(charts.ticket)
    found = check(graph)
    assign = [r for r in found.routes if r.edge.label == "ASSIGN [hasAssignee]"]
    assert len(assign) == 2 and all(r.label is not None for r in assign)


def test_the_checker_sees_a_label_over_a_box_and_an_arrow_through_one() -> None:
    """The oracle is not blind: the old straight-line drawing of the
    ticket chart, and two faults made by hand, are caught."""
    graph = chart_graph(charts.ticket)
    good = layout(graph)
    by_label = {graph.nodes[i].label: b for i, b in good.boxes.items()}
    bad = dataclasses.replace(good, routes=[dataclasses.replace(r) for r in good.routes])
    first = next(r for r in bad.routes if r.edge.label == "CLOSE")
    resolved = by_label["resolved"]
    first.label = Rect(resolved.x + 2, resolved.y + 2, 40, 15)  # on a state it does not join
    open_box, escalated = by_label["open"], by_label["escalated"]
    through = next(
        r
        for r in bad.routes
        if graph.nodes[r.edge.source].label == "open"
        and graph.nodes[r.edge.target].label == "closed"
    )
    through.points = [(open_box.cx, open_box.bottom), (escalated.cx, escalated.cy), (0.0, 0.0)]
    found = faults(graph, bad)
    assert {(f.rule, f.box) for f in found} >= {("label", "resolved"), ("segment", "escalated")}
    # an arrow's own ends and their containers are not obstacles
    assert all(f.box not in ("open", "closed", "ticket") for f in found if f.rule == "segment")


# --- made-up charts ------------------------------------------------------------------

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=14)
EVENTS = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=24)


@st.composite
def made_up_charts(draw: Any) -> tuple[dict[str, Any], int]:
    """A chart of nested compound, parallel, final and history states
    (up to 4 deep) with arrows between any two of them: up, down, across
    containers, to an ancestor or a descendant, to itself, targetless,
    guarded, delayed, eventless. Returns the chart and a seed for which
    arrows a path took."""
    counter = itertools.count()
    paths: list[str] = []

    def state(depth: int, path: str, parent_parallel: bool) -> dict[str, Any]:
        kinds = ["atomic", "atomic", "compound", "parallel", "final"] if depth < 4 else ["atomic"]
        kind = "compound" if parent_parallel and depth < 4 else draw(st.sampled_from(kinds))
        paths.append(path)
        if kind == "atomic":
            return {}
        if kind == "final":
            return {"type": "final"}
        count = draw(st.integers(min_value=1, max_value=4 if kind == "compound" else 3))
        names = [f"{draw(NAMES)}{next(counter)}" for _ in range(count)]
        children = {n: state(depth + 1, f"{path}.{n}", kind == "parallel") for n in names}
        if draw(st.booleans()) and draw(st.booleans()):
            children[f"h{next(counter)}"] = {
                "type": "history",
                "history": draw(st.sampled_from(["shallow", "deep"])),
            }
        node: dict[str, Any] = {"states": children}
        if kind == "parallel":
            node["type"] = "parallel"
        else:
            node["initial"] = names[0]
        return node

    root = state(0, "m", False)
    if "states" not in root:
        root = {"initial": "only", "states": {"only": {}}}
        paths.append("m.only")
    all_paths = list(dict.fromkeys(paths))
    by_path: dict[str, dict[str, Any]] = {}

    def index(node: dict[str, Any], path: str) -> None:
        by_path[path] = node
        for key, child in node.get("states", {}).items():
            index(child, f"{path}.{key}")

    index(root, "m")
    sources = [p for p in all_paths if by_path[p].get("type") not in ("final", "history")]
    for _ in range(draw(st.integers(min_value=0, max_value=min(30, 3 * len(all_paths))))):
        source = draw(st.sampled_from(sources))
        target = draw(st.sampled_from(all_paths))
        style = draw(st.sampled_from(["on", "on", "on", "guarded", "after", "targetless"]))
        node = by_path[source]
        ref = f"#{target}"
        if style == "after":
            node.setdefault("after", {})[str(draw(st.integers(1, 10**6)))] = ref
        elif style == "targetless":
            node.setdefault("on", {})[draw(EVENTS)] = {"actions": "act"}
        else:
            transition: dict[str, Any] = {"target": ref}
            if style == "guarded":
                transition["guard"] = "ok"
            node.setdefault("on", {})[draw(EVENTS)] = transition
    root["id"] = "m"
    return root, draw(st.integers(min_value=0, max_value=2**16))


LOGIC = MachineLogic(actions={"act": lambda *a: None}, guards={"ok": lambda *a: True})


def with_steps(graph: Graph, seed: int) -> Graph:
    """Some arrows marked taken (their labels get a badge)."""
    edges = tuple(
        dataclasses.replace(e, steps=tuple(range(1, 2 + (seed >> i) % 5)))
        if (seed >> (i % 16)) & 1
        else e
        for i, e in enumerate(graph.edges)
    )
    return dataclasses.replace(graph, edges=edges)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(made_up_charts())
def test_made_up_charts_keep_both_rules(made: tuple[dict[str, Any], int]) -> None:
    chart, seed = made
    machine = create_machine(chart, logic=LOGIC)
    check(with_steps(chart_graph(machine), seed))


def test_the_layout_does_not_depend_on_hash_seeds() -> None:
    """The same chart, the same drawing: in processes with different
    string hashing (nothing is ordered by a set or a hash)."""
    code = (
        "from tests.diagram import charts; from django_xsm.diagram import chart_graph, "
        "render_builtin; print(hash('x')); "
        "print(*(render_builtin(chart_graph(c)) for c in (charts.crossing, charts.history)))"
    )
    root = Path(__file__).resolve().parents[2]
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(done.stdout.split("\n", 1))
    assert runs[0][0] != runs[1][0]  # the seeds did change string hashing
    assert runs[0][1] == runs[1][1]


@pytest.mark.parametrize("count", [2, 6, 12])
@pytest.mark.parametrize("where", ["root", "compound"])
def test_many_loops_on_a_container_keep_their_labels_apart(count: int, where: str) -> None:
    """A container's box grows with its loops, as a leaf's does (six on
    the root once drew their labels over each other)."""
    loops = {"E" * (k + 1): "#m" if where == "root" else "#m.box" for k in range(count)}
    if where == "root":
        chart = {"id": "m", "initial": "only", "states": {"only": {}}, "on": loops}
    else:
        box = {"initial": "a", "states": {"a": {}}, "on": loops}
        chart = {"id": "m", "initial": "box", "states": {"box": box, "end": {}}}
    machine = create_machine(chart, logic=LOGIC)
    found = check(with_steps(chart_graph(machine), 0))
    assert len([r for r in found.routes if r.label is not None]) >= count
