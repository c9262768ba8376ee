"""Micro-benchmark of the engine's main paths (not a test; prints µs/op).

    .venv/bin/python bench/engine_paths.py [--number 20000]

Covers the send fast path, refused events, guarded (uncached) selection,
a parallel chart's general path, delayed-transition arming, and the
snapshot / restore / pure-transition calls the persistence layer makes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from django_xsm.engine import MachineLogic, create_machine


def inc(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["n"] += 1


LOGIC = MachineLogic(actions={"inc": inc}, guards={"even": lambda c, e: c["n"] % 2 == 0})

ORDER = {
    "id": "order",
    "initial": "cart",
    "context": {"n": 0},
    "states": {
        "cart": {
            "on": {
                "ADD": {"target": "cart", "actions": "inc"},
                "GUARDED": [{"guard": "even", "actions": "inc"}, {"actions": "inc"}],
                "PAY": "paid",
            }
        },
        "paid": {"type": "final"},
    },
}

PARALLEL = {
    "id": "p",
    "type": "parallel",
    "context": {"n": 0},
    "states": {
        "a": {
            "initial": "a1",
            "states": {"a1": {"on": {"FLIP": "a2"}}, "a2": {"on": {"FLIP": "a1"}}},
        },
        "b": {
            "initial": "b1",
            "states": {
                "b1": {"on": {"FLIP": {"target": "b2", "actions": "inc"}}},
                "b2": {"after": {"1000": "b1"}, "on": {"FLIP": "b1"}},
            },
        },
    },
}


def timed(label: str, fn: Callable[[], Any], number: int) -> None:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number * 1e6)
    print(f"{label:<44} {statistics.median(runs):8.2f} µs/op")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000)
    number = parser.parse_args().number

    order = create_machine(ORDER, logic=LOGIC)
    inst = order.start()
    timed("send: cached actions-only transition", lambda: inst.send("ADD"), number)
    timed("send: refused event", lambda: inst.send("NOPE"), number)
    timed("send: guarded selection (uncached)", lambda: inst.send("GUARDED"), number)
    par = create_machine(PARALLEL, logic=LOGIC).start(clock=lambda: 1_000)
    timed("send: parallel, 2 regions, arms a deadline", lambda: par.send("FLIP"), number)
    snap = inst.snapshot()
    timed("snapshot()", inst.snapshot, number)
    timed("restore(snapshot)", lambda: order.restore(snap), number)
    wire = json.dumps(snap)
    timed(
        "json round trip + restore + send + snapshot",
        lambda: order.restore(json.loads(wire)).send("ADD") and None,
        number,
    )
    timed(
        "transition(snapshot, 'ADD', now=...)", lambda: order.transition(snap, "ADD", now=0), number
    )
    timed("create_machine(order chart)", lambda: create_machine(ORDER, logic=LOGIC), number // 20)


if __name__ == "__main__":
    main()
