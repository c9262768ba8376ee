"""Mermaid ``stateDiagram-v2`` text: blocks for compound states, ``--``
between regions, ``[*]`` for initial and final states, Mermaid-safe ids
and escaped labels."""

from __future__ import annotations

import re

from django_xsm.diagram import chart_graph, mermaid_ids, to_mermaid
from django_xsm.engine import create_machine
from tests.diagram.charts import compound, hostile, parallel
from tests.diagram.support import walk


def test_a_compound_chart() -> None:
    text = to_mermaid(chart_graph(compound))
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2"
    assert lines[1] == "    [*] --> cart"
    start = lines.index('    state "checkout" as checkout {')
    block = lines[start : lines.index("    }", start) + 1]
    assert block == [
        '    state "checkout" as checkout {',
        "        [*] --> checkout__address",
        '        state "address" as checkout__address',
        '        state "payment" as checkout__payment',
        '        state "done" as checkout__done',
        "        checkout__done --> [*]",
        "        checkout__address --> checkout__payment : NEXT",
        "        checkout__payment --> checkout__done : PAY [paysTotal]",
        "        checkout__payment --> checkout__payment : RETRY",
        "    }",
    ]
    # arrows between blocks are written where both ends are visible
    assert "    cart --> checkout : CHECKOUT [hasItems]" in lines
    assert "    checkout__address --> cart : BACK" in lines
    assert "    checkout__payment --> cancelled : after 60000" in lines
    assert "    checkout --> paid : onDone" in lines
    assert "        paid__packing --> paid__ready : always [inStock]" in lines
    assert "    cart --> cart : ADD" in lines
    assert "    shipped --> [*]" in lines


def test_parallel_regions_are_separated_by_two_dashes() -> None:
    ids, _ = walk(parallel, "BULLETS")
    lines = to_mermaid(chart_graph(parallel, ids)).splitlines()
    start = lines.index('    state "editing" as editing {')
    assert lines[start + 1] == '        state "bold" as editing__bold {'
    separator = lines.index("        --")
    assert lines[separator + 1] == '        state "list" as editing__list {'
    assert "    classDef active fill:#bfe9c9,stroke:#1b7f3b,stroke-width:2px" in lines
    assert "    class editing__list__bullets active" in lines
    assert "    class saved active" not in lines


def test_ids_are_mermaid_safe_and_unique() -> None:
    machine = create_machine(
        {
            "id": "m",
            "initial": "a-b",
            "states": {
                "a-b": {},
                "a_b": {},
                "1st": {},
                "end": {},
                "wait here": {"initial": "x", "states": {"x": {}}},
            },
        }
    )
    graph = chart_graph(machine)
    found = {graph.nodes[k].state_id: v for k, v in mermaid_ids(graph).items()}
    assert found == {
        "m.a-b": "a_b",
        "m.a_b": "a_b_2",
        "m.1st": "s_1st",
        "m.end": "s_end",
        "m.wait here": "wait_here",
        "m.wait here.x": "wait_here__x",
    }


def test_hostile_strings_cannot_end_a_statement_or_inject_markup() -> None:
    text = to_mermaid(chart_graph(hostile))
    for line in text.splitlines():
        bare = re.sub(r"#\w+;", "", line)  # Mermaid's entity codes
        assert ";" not in bare and "<" not in bare and ">" not in bare.replace("-->", ""), line
        opens = bare.strip().startswith("state ") and bare.endswith(" {")
        assert bare.count("{") == (1 if opens else 0) and bare.count("}") <= (bare.strip() == "}")
    assert 'state "#lt;script#gt;a()#lt;/script#gt;" as _script_a____script_' in text
    assert "state X" not in text.replace('#125; state X #123;"', "")
    assert "#quot;#gt;#lt;img src=x onerror=alert(1)#gt;" in text
