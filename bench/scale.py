"""Do ``due_keys`` and a log page cost the same with 1 000 and 1 000 000
instances? (issue 4: within ±50 %.)

For each size N it starts a throw-away ``redis-server`` on a free loopback
port (stopped by pid), fills one namespace with N instances through the real
COMMIT script (pipelined, 1 000 per round trip), of which exactly ``--due``
have a deadline in the past and the rest deadlines far in the future, and
gives one instance ``--log`` transition records. Then it times, on the
loaded server:

* ``store.due_keys(now, limit=100)`` — the scanner's query;
* ``log.read(key, after_seq=..., limit=50)`` — one page of the admin's
  timeline;
* ``store.list_page(limit=50)`` — one page of the admin's instance list.

Usage::

    python bench/scale.py --sizes 1000,1000000 --json scale.json

Prints one JSON line per size; the ratio of medians is what matters
(absolute µs include this machine's noise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import redis

from bench.peer.harness import redis_server
from django_xsm.engine import MachineLogic, create_machine
from django_xsm.persistence.records import CommitUnit, LogEntry
from django_xsm.redis import RedisLog, RedisStore
from django_xsm.redis.calls import commit_call
from django_xsm.redis.core import Many

CHART = {
    "id": "order",
    "initial": "cart",
    "context": {"items": 0},
    "states": {"cart": {"on": {"ADD": {"actions": "add"}}}},
}
FAR_FUTURE_MS = 4_000_000_000_000  # year 2096


def _add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["items"] += 1


def fill(store: RedisStore, n: int, due: int, now_ms: int, batch: int = 1000) -> None:
    machine = create_machine(CHART, logic=MachineLogic(actions={"add": _add}))
    snapshot = machine.start().snapshot()
    layout = store.driver.run(store.core.state.ensure())  # reads the schema marker
    data = store.core.codec.encode(snapshot, key="x", version=1)
    state_ids = tuple(machine.start().state_ids)
    calls = []
    for i in range(n):
        key = f"order:{i:08d}"
        next_due = now_ms - 1000 - i if i < due else FAR_FUTURE_MS + i
        unit = CommitUnit(
            key=key,
            commit_id=f"fill{i}",
            expected_version=0,
            machine_id="order",
            machine_version="",
            snapshot=snapshot,
            state_ids=state_ids,
            next_due_ms=next_due,
        )
        calls.append(commit_call(layout, unit, data, ttl_ms=0, log_maxlen=0))
        if len(calls) == batch:
            store.driver.run(_run(Many(tuple(calls))))
            calls = []
    if calls:
        store.driver.run(_run(Many(tuple(calls))))


def _run(request: Any) -> Any:
    reply = yield request
    return reply


def timed(fn: Any, repeats: int) -> dict[str, float]:
    for _ in range(20):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return {
        "median_us": round(statistics.median(samples), 1),
        "p90_us": round(sorted(samples)[int(len(samples) * 0.9)], 1),
    }


def measure(n: int, due: int, log_records: int, repeats: int) -> dict[str, Any]:
    with redis_server() as url:
        client = redis.Redis.from_url(url)
        store = RedisStore(client, prefix="scale")
        log = RedisLog(client, prefix="scale")
        now_ms = int(time.time() * 1000)
        t0 = time.perf_counter()
        fill(store, n, due, now_ms)
        fill_s = time.perf_counter() - t0
        entry = LogEntry("ADD", {"n": 1}, "bench", "", "cart", "cart", "", "", now_ms)
        for v in range(log_records):
            log.append_next("order:00000000", entry, version=v + 1)
        memory = client.info("memory")["used_memory"]
        now_s = now_ms / 1000
        found = store.due_keys(now_s, limit=100)
        assert len(found) == min(due, 100), (len(found), due)
        mid = log_records // 2
        page = log.read("order:00000000", after_seq=mid, limit=50)
        assert len(page) == 50
        return {
            "instances": n,
            "due": due,
            "fill_s": round(fill_s, 1),
            "redis_used_memory_mb": round(memory / 2**20, 1),
            "due_keys_limit_100": timed(lambda: store.due_keys(now_s, limit=100), repeats),
            "log_page_50": timed(
                lambda: log.read("order:00000000", after_seq=mid, limit=50), repeats
            ),
            "list_page_50": timed(lambda: store.list_page(limit=50), repeats),
            "redis_version": client.info("server")["redis_version"],
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,1000000")
    ap.add_argument("--due", type=int, default=100)
    ap.add_argument("--log", type=int, default=1000, help="records in the one log read")
    ap.add_argument("--repeats", type=int, default=500)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        row = measure(n, a.due, a.log, a.repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if len(rows) >= 2:
        small, big = rows[0], rows[-1]
        ratios = {
            name: round(big[name]["median_us"] / small[name]["median_us"], 2)
            for name in ("due_keys_limit_100", "log_page_50", "list_page_50")
        }
        print(json.dumps({"ratio_big_over_small": ratios}), flush=True)
        rows.append({"ratio_big_over_small": ratios})
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
