"""How close is a keyed, audited request to the wire?

On a throw-away redis-server (free loopback port, stopped by pid), in one
process and run: wall and client-CPU µs of two plain ``GET`` round trips
on one connection (the floor of a two-round-trip request), against one
``persisted()`` block with the idempotency key at open, audit on, one ADD
(what ``@stateful_view`` does), and the server's µs per script call
(``INFO commandstats`` over the run).

Usage::

    .venv/bin/python bench/floor.py [--number 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000)
    n = parser.parse_args().number
    import redis

    from bench.model_field import redis_server
    from bench.xsm_adapter import AdapterKeyAtOpen

    with redis_server() as url:
        client = redis.Redis.from_url(url)
        send = AdapterKeyAtOpen().make_sender(client, "floor", True, "optimistic")
        for i in range(300):  # connections, scripts, the schema marker
            send(f"warm:{i}", "ADD", idempotency_key=f"w{i}")
            client.get("a")

        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            client.get("a")
            client.get("b")
        floor_wall = (time.perf_counter() - wall) / n * 1e6
        floor_cpu = (time.process_time() - cpu) / n * 1e6

        client.config_resetstat()
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            send(f"k:{i}", "ADD", idempotency_key=f"i{i}")
        req_wall = (time.perf_counter() - wall) / n * 1e6
        req_cpu = (time.process_time() - cpu) / n * 1e6
        stats = client.info("commandstats").get("cmdstat_evalsha", {})
    print(f"two GETs          {floor_wall:7.0f} µs wall  {floor_cpu:6.0f} µs client CPU")
    print(f"keyed request     {req_wall:7.0f} µs wall  {req_cpu:6.0f} µs client CPU")
    print(f"ratio             {req_wall / floor_wall:7.2f}x wall  {req_cpu / floor_cpu:6.2f}x CPU")
    print(f"server per script {stats.get('usec_per_call', 0):7.1f} µs (EVALSHA, INFO commandstats)")


if __name__ == "__main__":
    main()
