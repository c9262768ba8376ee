"""The chart as Mermaid ``stateDiagram-v2`` text, for docs and READMEs.

What is written, how states get Mermaid ids (:func:`mermaid_ids`) and
which characters are entity-coded (:func:`mermaid_text`): docs/commands.md
("The Mermaid text"). A chart string cannot end a statement, open a block
or inject markup. Active states get the ``active`` class.
"""

from __future__ import annotations

import re

from .graph import Edge, Graph, Node

__all__ = ["mermaid_ids", "mermaid_text", "to_mermaid"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_KEYWORDS = frozenset({"state", "end", "note", "class", "classdef", "direction", "as", "style"})
_CODES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", ";": "#59;"}
_CODES |= {"{": "#123;", "}": "#125;", ":": "#58;", "\\": "#92;"}


def mermaid_text(text: str) -> str:
    """``text`` safe inside a Mermaid label or arrow text."""
    flat = " ".join(text.split())
    return "".join(_CODES.get(c, c) for c in flat)


def mermaid_ids(graph: Graph) -> dict[str, str]:
    """Graph node id -> Mermaid id (see the module's docstring)."""
    found: dict[str, str] = {}
    used: set[str] = set()
    head = f"{graph.machine_id}."
    for node in graph.nodes.values():
        if node.parent is None:
            continue
        sid = node.state_id.removeprefix(head)
        base = _UNSAFE.sub("_", sid.replace(".", "__")) or "state"
        if base[0].isdigit() or base.lower() in _KEYWORDS:
            base = f"s_{base}"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        found[node.id] = name
    return found


class _Writer:
    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.ids = mermaid_ids(graph)
        self.lines: list[str] = ["stateDiagram-v2"]
        self.edges_at: dict[str, list[Edge]] = {}
        for e in graph.edges:
            if e.kind == "history":
                continue
            self.edges_at.setdefault(self.scope(e), []).append(e)

    def ref(self, node_id: str) -> str:
        return self.ids.get(node_id, "[*]")

    def scope(self, edge: Edge) -> str:
        """The innermost container holding both ends: where the arrow is
        written (Mermaid draws it between the blocks it names)."""
        ups = [edge.source, *self.g.ancestors(edge.source)]
        around = set(self.g.ancestors(edge.target))
        return next((a for a in ups if a in around and a != edge.source), self.g.root)

    def block(self, node: Node, pad: str) -> None:
        states = [self.g.nodes[c] for c in node.children]
        if node.kind == "parallel":
            regions = [s for s in states if s.kind != "history"]
            for i, region in enumerate(regions):
                if i:
                    self.lines.append(f"{pad}--")
                self.state(region, pad)
            for s in states:
                if s.kind == "history":
                    self.state(s, pad)
        else:
            if node.initial is not None:
                self.lines.append(f"{pad}[*] --> {self.ref(node.initial)}")
            for s in states:
                self.state(s, pad)
        for e in self.edges_at.get(node.id, []):
            text = f" : {mermaid_text(e.label)}" if e.label else ""
            self.lines.append(f"{pad}{self.ref(e.source)} --> {self.ref(e.target)}{text}")

    def state(self, node: Node, pad: str) -> None:
        mid = self.ids[node.id]
        label = ("H*" if node.deep else "H") if node.kind == "history" else node.label
        if node.is_container:
            self.lines.append(f'{pad}state "{mermaid_text(label)}" as {mid} {{')
            self.block(node, pad + "    ")
            self.lines.append(f"{pad}}}")
        else:
            self.lines.append(f'{pad}state "{mermaid_text(label)}" as {mid}')
        if node.kind == "final":
            self.lines.append(f"{pad}{mid} --> [*]")


def to_mermaid(graph: Graph) -> str:
    """The Mermaid ``stateDiagram-v2`` text of ``graph``."""
    writer = _Writer(graph)
    writer.block(graph.nodes[graph.root], "    ")
    active = [writer.ids[n.id] for n in graph.nodes.values() if n.active and n.parent]
    if active:
        writer.lines.append("    classDef active fill:#bfe9c9,stroke:#1b7f3b,stroke-width:2px")
        writer.lines.extend(f"    class {mid} active" for mid in active)
    taken = [e for e in graph.edges if e.steps]
    if taken:
        writer.lines.append(
            "    %% taken: "
            + "; ".join(
                f"{writer.ref(e.source)} -> {writer.ref(e.target)} at #"
                + ",".join(str(s) for s in e.steps)
                for e in taken
            )
        )
    return "\n".join(writer.lines) + "\n"
