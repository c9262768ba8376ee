"""How close is a keyed, audited request to the wire?

On a throw-away redis-server (free loopback port, stopped by pid), in one
process and run: wall and client-CPU µs of two plain ``GET`` round trips
on one connection (the floor of a two-round-trip request), against one
``persisted()`` block with the idempotency key at open, audit on, one ADD
(what ``@stateful_view`` does), the server's µs per script call
(``INFO commandstats`` over the run: wall time, so a busy machine inflates
it), the redis-server process's CPU per request (``INFO cpu``: not
inflated by waiting for a core) and the commands the scripts ran.

Usage::

    .venv/bin/python bench/floor.py [--number 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _server_cpu(client: Any) -> float:
    """CPU seconds the redis-server process has used (not inflated by the
    time it waits for a core, unlike commandstats' wall µs)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


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
        server_cpu = _server_cpu(client)
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            send(f"k:{i}", "ADD", idempotency_key=f"i{i}")
        req_wall = (time.perf_counter() - wall) / n * 1e6
        req_cpu = (time.process_time() - cpu) / n * 1e6
        server_cpu = (_server_cpu(client) - server_cpu) / n * 1e6
        every = client.info("commandstats")
        stats = every.get("cmdstat_evalsha", {})
    inner = {
        name.removeprefix("cmdstat_"): row["calls"] / n
        for name, row in every.items()
        if name not in ("cmdstat_evalsha", "cmdstat_info", "cmdstat_config|resetstat")
    }
    print(f"two GETs          {floor_wall:7.0f} µs wall  {floor_cpu:6.0f} µs client CPU")
    print(f"keyed request     {req_wall:7.0f} µs wall  {req_cpu:6.0f} µs client CPU")
    print(f"ratio             {req_wall / floor_wall:7.2f}x wall  {req_cpu / floor_cpu:6.2f}x CPU")
    print(f"server per script {stats.get('usec_per_call', 0):7.1f} µs (EVALSHA, INFO commandstats)")
    print(f"server CPU        {server_cpu:7.1f} µs per request (redis-server user + sys, INFO cpu)")
    scripts = stats.get("calls", 0) / n
    print(
        f"inside the scripts {sum(inner.values()):6.1f} commands per request "
        f"({scripts:.0f} scripts): "
        + ", ".join(f"{k} {v:g}" for k, v in sorted(inner.items(), key=lambda kv: -kv[1]))
    )


if __name__ == "__main__":
    main()
