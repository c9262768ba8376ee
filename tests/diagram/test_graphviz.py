"""The Graphviz renderer: ``dot -Tsvg`` on the DOT source, its output
filtered down to drawing elements and marked like the built-in one; a
missing, failing or hanging ``dot`` falls back to the built-in layout.
Skipped without Graphviz, except in CI (``CI=true``) or with
``XSM_REQUIRE_GRAPHVIZ=1``, where a missing ``dot`` fails."""

from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

import django_xsm.diagram as diagram
from django_xsm.conf.validation import parse
from django_xsm.diagram import GraphvizError, chart_graph, draw, render_graphviz, render_svg
from django_xsm.diagram import graphviz as gv
from tests.diagram.charts import compound, history, hostile, parallel
from tests.diagram.support import need_dot, walk

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def dot() -> str:
    return need_dot()


def fake_dot(tmp_path: Path, body: str) -> str:
    """An executable standing in for ``dot``."""
    path = tmp_path / "dot"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if cls in (g.get("class") or "").split()]


@pytest.mark.parametrize("machine", [compound, parallel, history], ids=lambda m: m.id)
def test_dot_draws_every_state_and_arrow(dot: str, machine: Any) -> None:
    graph = chart_graph(machine, machine.start().state_ids)
    text = render_graphviz(graph, dot)
    root = ET.fromstring(text)
    assert text.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="xsm-diagram" ')
    assert root.get("data-renderer") == "graphviz"
    assert {g.get("data-state-id") for g in _groups(root, "xsm-state")} == {
        n.id for n in machine.nodes
    }
    edges = _groups(root, "xsm-edge")
    assert sorted(g.get("data-edge-id") or "" for g in edges) == sorted(e.id for e in graph.edges)
    assert all(g.find(f"{SVG}path") is not None for g in edges)  # each one drawn
    labels = {(t.text or "").strip() for g in edges for t in g.iter(f"{SVG}text")}
    assert {e.label for e in graph.edges if e.label} <= labels
    leaf = next(g for g in _groups(root, "xsm-active") if "xsm-atomic" in (g.get("class") or ""))
    shapes = [e for e in leaf if e.tag in (f"{SVG}path", f"{SVG}polygon")]
    assert shapes and shapes[0].get("fill") == "#bfe9c9"


def test_the_path_is_thick_and_numbered(dot: str) -> None:
    ids, log = walk(compound, "CHECKOUT", "NEXT", "PAY")
    root = ET.fromstring(render_graphviz(chart_graph(compound, ids, log), dot))
    assert len(_groups(root, "xsm-initial")) == 3  # the dots of store, checkout, paid
    # Graphviz's own titles (its DOT ids) are gone; ours name states and transitions
    titles = {t.text for t in root.iter(f"{SVG}title")}
    assert "store.cart (atomic)" in titles and not any(re.match(r"s\d", t or "") for t in titles)
    taken = {g.get("data-source"): g for g in _groups(root, "xsm-taken")}
    assert set(taken) == {
        "store.cart",
        "store.checkout.address",
        "store.checkout.payment",
        "store.checkout",
    }
    steps = sorted(g.get("data-steps") or "" for g in taken.values())
    assert steps == ["1", "2", "3", "3"]
    for g in taken.values():
        assert g.find(f"{SVG}path").get("stroke") == "#1f6feb"  # type: ignore[union-attr]
        badge = g.find(f"{SVG}g[@class='xsm-step-badge']/{SVG}text")
        assert badge is not None and badge.text == g.get("data-steps")


def test_hostile_strings_are_drawn_as_text(dot: str) -> None:
    text = render_graphviz(chart_graph(hostile, hostile.start().state_ids), dot)
    assert "<script" not in text and "<img" not in text
    root = ET.fromstring(text)
    shown = {(t.text or "").strip() for t in root.iter(f"{SVG}text")}
    assert {"<script>a()</script>", "x&y", '"><img src=x onerror=alert(1)>'} <= shown
    assert 'q"]; s0 -> s1 [label="\\N' in shown  # DOT escapes stayed literal
    assert "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_only_drawing_elements_and_attributes_survive(tmp_path: Path) -> None:
    evil = (
        '<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
        '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">'
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        'viewBox="0 0 100 50"><script>alert(1)</script>'
        '<g id="xsm-s1" onclick="alert(2)" class="node"><title>s1</title>'
        '<a xlink:href="javascript:alert(3)"><text x="1" y="2">link</text></a>'
        '<polygon points="0,0 1,1" fill="url(http://evil/x)" stroke="#123456"/>'
        '<image href="http://evil/i.png"/><text x="5" y="6">&lt;b&gt;</text></g>'
        "<foreignObject><div>x</div></foreignObject></svg>"
    )
    binary = fake_dot(tmp_path, f"cat >/dev/null; printf '%s' '{evil}'")
    text = render_graphviz(chart_graph(compound), binary)
    for bad in (
        "script",
        "onclick",
        "href",
        "javascript",
        "image",
        "foreignObject",
        "url(",
        "DOCTYPE",
        "link",
    ):
        assert bad not in text, bad
    root = ET.fromstring(text)
    cart = _groups(root, "xsm-state")[0]
    assert cart.get("data-state-id") == "store.cart"
    assert cart.findtext(f"{SVG}title") == "store.cart (atomic)"
    assert cart.find(f"{SVG}polygon").get("stroke") == "#123456"  # type: ignore[union-attr]
    assert "&lt;b&gt;" in text


def test_dot_failing_or_hanging_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = chart_graph(compound)
    with pytest.raises(GraphvizError, match="exited with status 3: boom"):
        render_graphviz(graph, fake_dot(tmp_path, "cat >/dev/null; echo boom >&2; exit 3"))
    monkeypatch.setattr(gv, "TIMEOUT_S", 0.3)
    slow = tmp_path / "slow"
    slow.mkdir()
    with pytest.raises(GraphvizError, match=r"longer than 0\.3 s"):
        render_graphviz(graph, fake_dot(slow, "sleep 5"))
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    with pytest.raises(GraphvizError, match="does not parse"):
        render_graphviz(graph, fake_dot(garbled, "cat >/dev/null; echo '<svg'"))


def test_the_built_in_layout_draws_when_dot_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = fake_dot(tmp_path, "cat >/dev/null; exit 1")
    monkeypatch.setattr(diagram, "dot_binary", lambda: broken)
    with caplog.at_level(logging.WARNING, "django_xsm.diagram"):
        drawing = draw(chart_graph(compound), "auto")
    assert drawing.renderer == "builtin" and drawing.note.startswith("Graphviz failed")
    assert 'data-renderer="builtin"' in drawing.svg
    assert "drawn with the built-in layout" in caplog.text


def test_the_renderer_setting(
    settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(diagram, "dot_binary", lambda: None)
    settings.XSM = {**settings.XSM, "DIAGRAM": {"RENDERER": "graphviz"}}
    with caplog.at_level(logging.WARNING, "django_xsm.diagram"):
        svg = render_svg(compound)
    assert 'data-renderer="builtin"' in svg and "dot is not on PATH" in caplog.text
    caplog.clear()
    settings.XSM = {**settings.XSM, "DIAGRAM": {"RENDERER": "auto"}}
    assert draw(chart_graph(compound)).note == "Graphviz's dot is not on PATH"
    assert caplog.text == ""  # auto without dot is not a problem
    monkeypatch.setattr(diagram, "dot_binary", lambda: pytest.fail("builtin must not look for dot"))
    settings.XSM = {**settings.XSM, "DIAGRAM": {"RENDERER": "builtin"}}
    assert 'data-renderer="builtin"' in render_svg(compound)


def test_the_renderer_setting_is_validated() -> None:
    assert parse({"PREFIX": "p"}, debug=False).diagram.renderer == "auto"
    assert parse({"DIAGRAM": {"RENDERER": "builtin"}}, debug=False).diagram.renderer == "builtin"
    with pytest.raises(
        ImproperlyConfigured,
        match=r"XSM\['DIAGRAM'\]\['RENDERER'\]: expected one of 'auto', 'graphviz', "
        r"'builtin', got 'svg'",
    ):
        parse({"DIAGRAM": {"RENDERER": "svg"}}, debug=False)
    with pytest.raises(ImproperlyConfigured, match=r"XSM\['DIAGRAM'\]\['ENGINE'\]"):
        parse({"DIAGRAM": {"ENGINE": "dot"}}, debug=False)
