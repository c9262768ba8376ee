"""What does a decorated request cost on each Redis topology?

One process, servers started here on free loopback ports and stopped by pid
(the test suite's harness: ``tests/redis/servers.py``,
``tests/topology/servers.py``):

* ``standalone`` — one redis-server;
* ``cluster`` — a 3-master Redis Cluster (``REDIS_CLUSTER``, 24 buckets);
* ``replicated`` — a primary and one replica, ``DURABILITY: {"MIN_REPLICAS": 1}``
  (every commit waits for the replica with WAIT, pipelined with it);
* ``replicated-async`` — the same pair without ``DURABILITY`` (the cost of
  WAIT alone is the difference to this row).

For each: µs per decorated request (``@stateful_view``, ``POST`` with an
``Idempotency-Key``, audit on, optimistic lock, Django's test client; the
median of ``--repeat`` runs of ``--number`` requests, each on a new key and
a new idempotency key) and the Redis round trips of one request.

Usage::

    .venv/bin/python bench/topologies.py [--number 300] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MACHINES = {"ticket": "tests.django.machines.ticket"}


def setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django.settings"
    import django

    django.setup()
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client needs testserver in ALLOWED_HOSTS


@contextmanager
def xsm(value: dict[str, Any]) -> Iterator[None]:
    from django.test import override_settings

    from django_xsm import backend

    with override_settings(XSM=value):
        try:
            yield
        finally:
            built = backend.build._backend
            if built is not None:
                built.client.close()


def base(**changes: Any) -> dict[str, Any]:
    return {
        "PREFIX": "bench",
        "MACHINES": MACHINES,
        "SOCKET_TIMEOUT_S": 2.0,
        "BUCKETS": 24,
        **changes,
    }


@contextmanager
def topology(name: str) -> Iterator[dict[str, Any]]:
    """The XSM settings of ``name`` on servers that live for the block."""
    from tests.redis.servers import RedisServer, wait_until
    from tests.topology.servers import RedisCluster3

    with ExitStack() as stack:
        if name == "standalone":
            server = RedisServer().start()
            stack.callback(server.cleanup)
            yield base(REDIS_URL=server.url)
        elif name == "cluster":
            cluster = stack.enter_context(RedisCluster3())
            yield base(REDIS_URL=cluster.seed_url, REDIS_CLUSTER=True)
        else:
            primary = RedisServer().start()
            stack.callback(primary.cleanup)
            replica = RedisServer(extra=["--replicaof", "127.0.0.1", str(primary.port)]).start()
            stack.callback(replica.cleanup)
            link = replica.client()
            wait_until(
                lambda: link.info("replication").get("master_link_status") == "up",
                timeout=20,
                what="the replica's link",
            )
            durability = {"MIN_REPLICAS": 1 if name == "replicated" else 0, "TIMEOUT_MS": 500}
            yield base(REDIS_URL=primary.url, DURABILITY=durability)


def requests(client: Any, tag: str) -> Callable[[int], None]:
    def run(n: int) -> None:
        for i in range(n):
            response = client.post(f"/t/{tag}{i}/bump", HTTP_IDEMPOTENCY_KEY=f"{tag}-{i}")
            if response.status_code != 201:
                raise SystemExit(f"{tag}: {response.status_code} {response.content[:200]!r}")

    return run


def round_trips(client: Any, tag: str) -> int:
    import redis.connection

    count = 0
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> Any:
        nonlocal count
        count += 1
        return original(self, command, check_health)

    redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        client.post(f"/t/{tag}/bump", HTTP_IDEMPOTENCY_KEY=f"{tag}-rt")
    finally:
        redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
    return count


def measure(name: str, number: int, repeat: int) -> dict[str, Any]:
    from django.test import Client

    with topology(name) as settings, xsm(settings):
        client = Client()
        requests(client, "warm")(50)  # connections, scripts, the schema marker
        runs = []
        for r in range(repeat):
            run = requests(client, f"{name}-{r}-")
            started = time.perf_counter()
            run(number)
            runs.append((time.perf_counter() - started) / number * 1e6)
        return {
            "topology": name,
            "us_per_request": round(statistics.median(runs), 1),
            "runs_us": [round(x, 1) for x in runs],
            "round_trips": round_trips(client, f"{name}-rt"),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--only", nargs="*", default=["standalone", "cluster", "replicated-async", "replicated"]
    )
    args = parser.parse_args()
    setup_django()
    rows = [measure(name, args.number, args.repeat) for name in args.only]
    for row in rows:
        print(
            f"{row['topology']:<17} {row['us_per_request']:>8.1f} µs/request  "
            f"{row['round_trips']} round trips  runs {row['runs_us']}"
        )
    if args.json:
        import redis

        args.json.write_text(
            json.dumps(
                {
                    "rows": rows,
                    "python": platform.python_version(),
                    "redis_py": redis.__version__,
                    "machine": platform.platform(),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
