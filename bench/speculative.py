"""What a speculative block saves: one keyed, audited request on a warm key.

On a throw-away redis-server (free loopback port, stopped by pid), in one
process and run, alternating the cases in rounds so drift hits all of
them alike, wall and client-CPU µs per request of:

- one and two plain ``GET`` round trips on one connection (the floors of
  a one- and a two-round-trip request);
- a ``persisted()`` block with the idempotency key at open, audit on, one
  ADD (what ``@stateful_view`` does): two round trips, on a new key each
  time and on one key (the like-for-like of the next line);
- the same block with ``speculative=True`` on a key this store committed
  last (every request to the same key): one round trip.

Usage::

    .venv/bin/python bench/speculative.py [--number 2000] [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _time(n: int, step: Callable[[int], Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        step(i)
    return (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import redis

    from bench.model_field import redis_server
    from bench.xsm_adapter import AdapterKeyAtOpen, AdapterSpeculative

    n = args.number
    results: dict[str, list[tuple[float, float]]] = {}
    with redis_server() as url:
        client = redis.Redis.from_url(url)
        at_open = AdapterKeyAtOpen().make_sender(client, "open", True, "optimistic")
        warm = AdapterSpeculative().make_sender(client, "spec", True, "optimistic")
        for i in range(300):  # connections, scripts, the schema markers, the warm key
            at_open(f"warm:{i}", "ADD", idempotency_key=f"w{i}")
            warm("hot", "ADD", idempotency_key=f"w{i}")
            client.get("a")
        offset = 0
        for r in range(args.rounds):
            offset += n
            cases: dict[str, Callable[[int], Any]] = {
                "one GET": lambda i: client.get("a"),
                "two GETs": lambda i: (client.get("a"), client.get("b")),
                "keyed request (key at open)": lambda i, o=offset: at_open(
                    f"k:{o + i}", "ADD", idempotency_key=f"i{o + i}"
                ),
                "keyed request (key at open), one key": lambda i, o=offset: at_open(
                    "hot", "ADD", idempotency_key=f"h{o + i}"
                ),
                "keyed request, speculative, warm key": lambda i, o=offset: warm(
                    "hot", "ADD", idempotency_key=f"s{o + i}"
                ),
            }
            for name, step in cases.items():
                if name.startswith("keyed request, speculative"):
                    client.config_resetstat()
                results.setdefault(name, []).append(_time(n, step))
                if name.startswith("keyed request, speculative"):
                    stats = client.info("commandstats").get("cmdstat_evalsha", {})
                    results.setdefault("server µs per speculative commit", []).append(
                        (float(stats.get("usec_per_call", 0)), float(stats.get("calls", 0)) / n)
                    )
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    medians = {
        name: (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
        for name, rows in results.items()
    }
    for name, (wall, cpu) in medians.items():
        if name.startswith("server"):
            print(f"{name:40s} {wall:7.1f} µs, {cpu:.2f} scripts per request")
        else:
            print(f"{name:40s} {wall:7.0f} µs wall  {cpu:6.0f} µs client CPU")
    spec = medians["keyed request, speculative, warm key"]
    same = medians["keyed request (key at open), one key"]
    print(
        f"speculative / key at open {spec[0] / same[0]:5.2f}x wall  {spec[1] / same[1]:5.2f}x CPU"
    )
    two = medians["two GETs"]
    one = medians["one GET"]
    print(f"speculative / two GETs {spec[0] / two[0]:5.2f}x wall  {spec[1] / two[1]:5.2f}x CPU")
    print(f"speculative / one GET  {spec[0] / one[0]:5.2f}x wall  {spec[1] / one[1]:5.2f}x CPU")
    if args.json:
        args.json.write_text(json.dumps({"number": n, "rounds": results}, indent=1))


if __name__ == "__main__":
    main()
