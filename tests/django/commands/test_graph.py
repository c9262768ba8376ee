"""xsm_graph: a machine's chart as SVG, DOT or Mermaid, to stdout or a
file, with an instance's state and path; unknown machines and instances
are plain errors."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError

import django_xsm.diagram as diagram
from django_xsm.registry import machines
from tests.diagram.support import need_dot
from tests.django.commands.conftest import run

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def ticket(backend: Any) -> str:
    from tests.django.admin.conftest import seed_ticket

    seed_ticket("t:1")
    machines["ticket"].objects.send("t:1", "CLOSE", actor="carl")
    return "t:1"


def test_svg_by_graphviz() -> None:
    need_dot()
    out = run("xsm_graph", "ticket")
    root = ET.fromstring(out.out)
    assert root.get("data-renderer") == "graphviz" and out.err == ""
    states = {g.get("data-state-id") for g in root.iter(f"{SVG}g") if g.get("data-state-id")}
    assert states == {n.id for n in machines["ticket"].machine.nodes}


def test_svg_without_graphviz_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diagram, "dot_binary", lambda: None)
    out = run("xsm_graph", "ticket", "--format", "svg")
    assert ET.fromstring(out.out).get("data-renderer") == "builtin"
    assert out.err.strip() == "Graphviz's dot is not on PATH: drawn with the built-in layout"
    with pytest.raises(CommandError, match=r"dot is not on PATH; install Graphviz"):
        run("xsm_graph", "ticket", "--renderer", "graphviz")
    out = run("xsm_graph", "ticket", "--renderer", "builtin")
    assert ET.fromstring(out.out).get("data-renderer") == "builtin" and out.err == ""


def test_dot_needs_no_graphviz(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diagram, "dot_binary", lambda: pytest.fail("no dot needed"))
    out = run("xsm_graph", "ticket", "--format", "dot").out
    assert out.startswith('digraph "ticket" {\n')
    assert 'label=" CLOSE [bumped] "' in out and 'label=" after 60000 "' in out


def test_mermaid() -> None:
    out = run("xsm_graph", "order", "--format", "mermaid").out
    lines = out.splitlines()
    assert lines[0] == "stateDiagram-v2" and "    [*] --> cart" in lines
    assert "    cart --> awaiting_payment : CHECKOUT [hasItems]" in lines
    assert "    shipped --> [*]" in lines


def test_an_instance_shows_its_state_and_path(ticket: str, tmp_path: Path) -> None:
    target = tmp_path / "t1.mmd"
    out = run(
        "xsm_graph", "ticket", "--format", "mermaid", "--instance", ticket, "--output", target
    )
    assert out.out.strip() == f"Wrote {target}"
    text = target.read_text()
    assert "    class closed active" in text and "    class open active" not in text
    assert "%% taken: " in text and "open -> closed at #2" in text
    svg = run("xsm_graph", "ticket", "--instance", ticket, "--renderer", "builtin").out
    root = ET.fromstring(svg)
    taken = [g for g in root.iter(f"{SVG}g") if "xsm-taken" in (g.get("class") or "")]
    assert [(g.get("data-target"), g.get("data-steps")) for g in taken] == [
        ("ticket.open", "1"),
        ("ticket.closed", "2"),
    ]
    none = run("xsm_graph", "ticket", "--instance", ticket, "--log", "0", "--format", "dot").out
    assert "#1f6feb" not in none


def test_unknown_machine_lists_the_known_ones() -> None:
    with pytest.raises(CommandError) as found:
        run("xsm_graph", "nope")
    assert str(found.value) == (
        "Unknown machine 'nope'; the registered machines are: " + ", ".join(machines.names())
    )


def test_unknown_instance_and_bad_arguments(backend: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"No instance 'ticket:404' of machine 'ticket'"):
        run("xsm_graph", "ticket", "--instance", "ticket:404")
    with pytest.raises(CommandError, match="invalid choice: 'png'"):
        run("xsm_graph", "ticket", "--format", "png")
    with pytest.raises(CommandError, match=r"Cannot write .*missing/x\.svg"):
        run("xsm_graph", "ticket", "--format", "dot", "--output", tmp_path / "missing" / "x.svg")


def test_a_machine_by_its_chart_id(xsm: Any) -> None:
    xsm(MACHINES={"tickets": "tests.django.machines.ticket"})
    assert run("xsm_graph", "ticket", "--format", "dot").out.startswith('digraph "ticket"')
