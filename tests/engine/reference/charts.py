"""Random reference cases (seeded): charts and the steps to run on them.

``random_case(seed)`` always returns the same case for the same seed. The
charts use the vocabulary of :mod:`.cases` and cover nested compound
states, parallel regions, shallow and deep history (with and without a
default target), final states and ``onDone``, guarded ``always``,
guarded transitions and fallbacks, ``inc`` / ``set`` / recording actions,
``xstate.raise`` and ``xstate.emit``, targetless, internal and reentering
transitions, ``#id`` and sibling targets, wildcard descriptors, ``after``
(both its forms) on the virtual clock, and the object form of
``initial``. The steps send events (some with a payload) and advance the
clock.
"""

from __future__ import annotations

import random
from typing import Any

from .cases import Case

EVENTS = ("E1", "E2", "E3", "a.b", "a.c")
DESCRIPTORS = (*EVENTS, "*", "a.*")
DELAYS = ("0", "50", "100", "250")
GUARDS = (
    "yes",
    "no",
    "even",
    "flag",
    {"type": "nlt", "params": {"v": 2}},
    {"type": "nlt", "params": {"v": 4}},
    {"type": "ngt", "params": {"v": 1}},
)
MAX_DEPTH = 3


class _Node:
    def __init__(self, key: str, parent: _Node | None, kind: str) -> None:
        self.key = key
        self.parent = parent
        self.kind = kind  # atomic, compound, parallel, final, history
        self.children: list[_Node] = []
        self.id = key if parent is None else f"{parent.id}.{key}"
        self.depth = 0 if parent is None else parent.depth + 1
        self.config: dict[str, Any] = {}


class _Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0
        self.nodes: list[_Node] = []
        self.log_id = 0

    # -- structure -------------------------------------------------------

    def key(self) -> str:
        self.count += 1
        return f"s{self.count}"

    def tree(self) -> _Node:
        root = _Node("m", None, "parallel" if self.rng.random() < 0.2 else "compound")
        self.nodes.append(root)
        self.children(root)
        return root

    def children(self, node: _Node) -> None:
        rng = self.rng
        for _ in range(rng.randint(2, 3)):
            roll = rng.random()
            deeper = node.depth + 1 < MAX_DEPTH
            if deeper and roll < 0.22:
                kind = "compound"
            elif deeper and roll < 0.32:
                kind = "parallel"
            elif node.kind == "compound" and roll < 0.44:
                kind = "final"
            else:
                kind = "atomic"
            child = _Node(self.key(), node, kind)
            node.children.append(child)
            self.nodes.append(child)
            if kind in ("compound", "parallel"):
                self.children(child)
        if rng.random() < 0.35:
            hist = _Node(self.key(), node, "history")
            node.children.append(hist)
            self.nodes.append(hist)

    # -- pieces ----------------------------------------------------------

    def action(self) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.3:
            self.log_id += 1
            return {"type": "log", "params": {"id": self.log_id}}
        if roll < 0.5:
            return {"type": "inc", "params": {"by": rng.choice((1, 1, 2, 0))}}
        if roll < 0.6:
            return {"type": "set", "params": {"v": rng.choice((0, 1, 3))}}
        if roll < 0.85:
            return {"type": "xstate.raise", "event": {"type": rng.choice(EVENTS)}}
        return {"type": "xstate.emit", "event": {"type": "out", "n": rng.randint(0, 9)}}

    def actions(self, most: int = 2) -> list[Any]:
        return [self.action() for _ in range(self.rng.randint(1, most))]

    def target(self, source: _Node) -> str | None:
        """A target for a transition of ``source`` (``None``: targetless)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.18:
            return None
        candidates = [n for n in self.nodes if n.parent is not None]
        if roll < 0.35 and source.parent is not None:
            siblings = [n for n in source.parent.children if n is not source]
            if siblings:
                return rng.choice(siblings).key
        if roll < 0.42 and source.children:
            return "." + rng.choice(source.children).key
        return "#" + rng.choice(candidates).id

    def transition(self, source: _Node, *, eventless: bool = False) -> Any:
        rng = self.rng
        target = self.target(source)
        if eventless and target is None:
            # a targetless eventless transition loops unless its guard ends it
            return {"guard": {"type": "nlt", "params": {"v": 3}}, "actions": [self.inc()]}
        if not eventless and target is not None and rng.random() < 0.2:
            return target  # the string form
        t: dict[str, Any] = {}
        if target is not None:
            t["target"] = target
        if eventless or rng.random() < 0.35:
            t["guard"] = rng.choice(GUARDS)
        if rng.random() < 0.4:
            t["actions"] = self.actions()
        if target is not None and rng.random() < 0.15:
            t["reenter"] = True
        return t

    def inc(self) -> dict[str, Any]:
        return {"type": "inc", "params": {"by": 1}}

    def transitions(self, source: _Node, *, eventless: bool = False) -> Any:
        if self.rng.random() < 0.25:
            return [
                self.transition(source, eventless=eventless),
                self.transition(source, eventless=eventless),
            ]
        return self.transition(source, eventless=eventless)

    # -- filling the tree --------------------------------------------------

    def fill(self, node: _Node) -> dict[str, Any]:
        rng = self.rng
        config = node.config
        if node.kind == "history":
            config["type"] = "history"
            if rng.random() < 0.5:
                config["history"] = "deep"
            others = [c for c in node.parent.children if c.kind != "history"] if node.parent else []
            if others and rng.random() < 0.5:
                config["target"] = rng.choice(others).key
            return config
        if node.kind in ("parallel", "final"):
            config["type"] = node.kind
        if node.kind == "compound":
            config["initial"] = self.initial(node)
        if node.children:
            config["states"] = {c.key: self.fill(c) for c in node.children}
        if rng.random() < 0.3:
            config["entry"] = self.actions()
        if rng.random() < 0.25:
            config["exit"] = self.actions()
        if node.kind == "final":
            return config
        on: dict[str, Any] = {}
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
            on[rng.choice(DESCRIPTORS)] = self.transitions(node)
        if on:
            config["on"] = on
        if rng.random() < 0.12:
            config["always"] = self.transitions(node, eventless=True)
        if rng.random() < 0.15:
            after: dict[str, Any] = {}
            for delay in rng.sample(DELAYS, rng.randint(1, 2)):
                target = self.target(node)
                if target is not None and rng.random() < 0.2:
                    after[delay] = [target]  # a list of strings (see docs/engine.md)
                else:
                    after[delay] = self.transitions(node)
            config["after"] = after
        if node.kind in ("compound", "parallel") and rng.random() < 0.3:
            config["onDone"] = self.transitions(node)
        return config

    def initial(self, node: _Node) -> Any:
        rng = self.rng
        states = [c for c in node.children if c.kind != "history"]
        histories = [c for c in node.children if c.kind == "history"]
        first = rng.choice(states)
        key = first.key
        if histories and rng.random() < 0.15:
            hist = histories[0]
            # a history as initial state needs a target (else it enters itself)
            hist.config["target"] = first.key
            key = hist.key
        if rng.random() < 0.15:
            return {"target": key, "actions": self.actions()}
        return key

    def steps(self) -> list[dict[str, Any]]:
        rng = self.rng
        out: list[dict[str, Any]] = []
        for _ in range(rng.randint(3, 9)):
            if rng.random() < 0.25:
                out.append({"advance": rng.choice((60, 120, 300))})
            else:
                event: dict[str, Any] = {"type": rng.choice(EVENTS)}
                if rng.random() < 0.3:
                    event["ok"] = rng.random() < 0.5
                out.append({"event": event})
        return out


def random_case(seed: int, *, max_microsteps: int = 100) -> Case:
    """The random case of ``seed`` (a chart, its steps, the microstep cap)."""
    gen = _Generator(seed)
    root = gen.tree()
    machine = {"id": "m", "context": {"n": 0}, **gen.fill(root)}
    return {
        "name": f"random-{seed}",
        "machine": machine,
        "steps": gen.steps(),
        "max_microsteps": max_microsteps,
    }
