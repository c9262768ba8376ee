"""The DOT source (``xsm_graph --format dot``, and what ``dot`` is fed):
clusters for containers, one node per other state, labelled edges, and
chart strings that stay inside their quotes."""

from __future__ import annotations

import re

from django_xsm.diagram import chart_graph, to_dot
from django_xsm.diagram.dot import quote
from tests.diagram.charts import compound, history, hostile, parallel
from tests.diagram.support import walk


def _statement(source: str, name: str) -> str:
    found = re.search(rf"^\s*{name} \[.*\]$", source, re.M)
    assert found, f"no statement for {name} in:\n{source}"
    return found.group(0)


def test_containers_are_clusters_and_other_states_nodes() -> None:
    source = to_dot(chart_graph(compound))
    assert source.startswith('digraph "store" {\n') and source.endswith("}\n")
    assert "compound=true" in source
    clusters = re.findall(r"subgraph cluster_(s\d+) \{", source)
    assert len(clusters) == 3  # store, checkout, paid
    assert 'label="checkout"' in source and 'id="xsm-s2"' in source
    # one node per atomic/final state, each with the id the SVG is read by
    leaves = [n for n in compound.nodes if n.type in ("atomic", "final")]
    assert len(re.findall(r'^\s*s\d+ \[label=.*id="xsm-s\d+"', source, re.M)) == len(leaves)
    assert 'peripheries="2"' in _statement(source, "s5")  # checkout.done is final


def test_edges_are_labelled_and_clipped_at_cluster_borders() -> None:
    source = to_dot(chart_graph(compound))
    edges = re.findall(r"^  (\S+) -> (\S+) \[(.*)\]$", source, re.M)
    labels = [re.search(r'label=" (.*?) "', attrs).group(1) for _, _, attrs in edges]  # type: ignore[union-attr]
    assert sorted(labels) == sorted([
        "ADD", "CHECKOUT [hasItems]", "CANCEL", "NEXT", "BACK", "PAY [paysTotal]", "RETRY",
        "after 60000", "onDone", "always [inStock]", "PACKED", "SHIP", "REFUND",
    ])  # fmt: skip
    by_label = {re.search(r'label=" (.*?) "', a).group(1): (s, t, a) for s, t, a in edges}  # type: ignore[union-attr]
    tail, head, attrs = by_label["CHECKOUT [hasItems]"]
    assert (tail, head) == ("s1", "s2_in") and 'lhead="cluster_s2"' in attrs
    tail, head, attrs = by_label["onDone"]
    assert 'ltail="cluster_s2"' in attrs and 'lhead="cluster_s6"' in attrs
    assert 'style="dashed"' in by_label["ADD"][2]  # targetless
    # the initial arrows
    assert re.search(r"s0_in -> s1 \[", source) and 'id="xsm-s2-initial"' in source


def test_parallel_regions_are_dashed_clusters_and_history_circles() -> None:
    source = to_dot(chart_graph(parallel))
    regions = re.findall(r'label="(bold|list)"; labeljust="l"; style="dashed,filled"', source)
    assert regions == ["bold", "list"]
    source = to_dot(chart_graph(history))
    assert re.search(r'label="H\*", shape="circle"', source)
    assert re.search(r'label="H", shape="circle"', source)


def test_active_states_and_the_path() -> None:
    ids, log = walk(compound, "CHECKOUT", "NEXT")
    source = to_dot(chart_graph(compound, ids, log))
    assert 'fillcolor="#bfe9c9"' in _statement(source, "s4")  # checkout.payment
    assert 'fillcolor="#ffffff"' in _statement(source, "s1")  # cart
    taken = [line for line in source.splitlines() if "penwidth=" in line and "->" in line]
    assert len(taken) == 2 and all('color="#1f6feb"' in line for line in taken)


def test_without_clipping_no_edge_names_a_cluster() -> None:
    source = to_dot(chart_graph(compound), clip=False)
    assert "lhead" not in source and "ltail" not in source


def test_quote_escapes_what_dot_would_read() -> None:
    assert quote('a"b') == '"a\\"b"'
    assert quote("a\\nb") == '"a\\\\nb"'  # stays a backslash and an n
    assert quote("a\nb\tc") == '"a b c"'
    assert quote("x&lt;y") == '"x&amp;lt;y"'


def test_hostile_strings_stay_inside_their_quotes() -> None:
    source = to_dot(chart_graph(hostile))
    for line in source.splitlines():
        # outside the quoted strings, only DOT syntax of our own
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line)
        assert not re.search(r"script|img|onerror|label=\s*[^\"\s]", bare), line
    assert 'label=" q\\"]; s0 -> s1 [label=\\"\\\\N "' in source
