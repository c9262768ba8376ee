"""What does ``order.status.send()`` cost over a bare ``persisted()`` block?

The model field adds the projection: one fenced SQL ``UPDATE`` per commit,
and nothing else on Redis. This measures, against one real Redis (a
throw-away ``redis-server`` on a free loopback port, stopped by pid, or
``XSM_REDIS_URL``), µs per send (median of ``--repeat`` runs of
``--number`` sends) and, for one send, the Redis round trips and SQL
statements:

* ``persisted()`` — a bare block with the Django layer's plugins (audit,
  idempotency, transition signals), one ADD;
* ``objects.send()`` — ``machines["shop"].objects.send(key, "ADD")``;
* ``order.status.send()`` — the model field, on SQLite (a file) and on
  PostgreSQL (127.0.0.1:5432, when it answers).

Usage::

    .venv/bin/python bench/model_field.py [--number 500] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@contextmanager
def redis_server() -> Iterator[str]:
    url = os.environ.get("XSM_REDIS_URL")
    if url:
        yield url
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="xsm-bench-")
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        import redis

        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def setup_django(redis_url: str, sqlite_path: str) -> bool:
    """Configure the field tests' settings on a real Redis; True when a
    PostgreSQL answers (then it is the ``postgres`` database)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django.settings"
    import django
    from django.conf import settings

    django.setup()
    settings.XSM = {**settings.XSM, "REDIS_URL": redis_url, "EMBEDDED": None,
                    "PREFIX": "bench-fields"}  # fmt: skip
    settings.DATABASES["default"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": sqlite_path}
    from django.core.management import call_command
    from django.db import connections

    from django_xsm import conf

    conf.reset()
    connections["default"].close()
    call_command("migrate", run_syncdb=True, verbosity=0, database="default")
    has_pg = "postgres" in settings.DATABASES
    if has_pg:
        _pg_admin(f"DROP DATABASE IF EXISTS {BENCH_DB}", f"CREATE DATABASE {BENCH_DB}")
        settings.DATABASES["postgres"]["NAME"] = BENCH_DB
        call_command("migrate", run_syncdb=True, verbosity=0, database="postgres")
    return has_pg


BENCH_DB = "xsm_bench_fields"


def _pg_admin(*statements: str) -> None:
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["postgres"]
    params = {"host": db["HOST"], "port": int(db["PORT"]), "user": db["USER"]}
    with psycopg.connect(
        **params, password=db["PASSWORD"], dbname="postgres", autocommit=True
    ) as conn:
        for statement in statements:
            conn.execute(statement)


class RoundTrips:
    def __init__(self) -> None:
        import redis.connection

        self.count = 0
        original = redis.connection.AbstractConnection.send_packed_command

        def counting(conn: Any, command: Any, check_health: bool = True) -> Any:
            self.count += 1
            return original(conn, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]


def per_send(fn: Callable[[int], Any], number: int, repeat: int) -> float:
    runs = []
    for r in range(repeat):
        start = time.perf_counter()
        for i in range(number):
            fn(r * number + i)
        runs.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(runs)


def costs(fn: Callable[[int], Any], rt: RoundTrips, alias: str | None) -> dict[str, int]:
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    fn(10**9)  # warm
    before = rt.count
    if alias is None:
        fn(10**9 + 1)
        return {"round_trips": rt.count - before, "sql": 0}
    with CaptureQueriesContext(connections[alias]) as queries:
        fn(10**9 + 1)
    return {"round_trips": rt.count - before, "sql": len(queries.captured_queries)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, redis_server() as url:
        has_pg = setup_django(url, str(Path(tmp) / "bench.sqlite3"))
        from django_xsm import backend
        from django_xsm.persistence import persisted
        from django_xsm.registry import machines
        from tests.fieldapp.models import Order

        rt = RoundTrips()
        store, entry = backend.get_backend(), machines["shop"]

        def bare(i: int) -> Any:
            with persisted(
                store.store, f"bare:{i % 50}", entry.machine, plugins=store.plugins
            ) as b:
                return b.send("ADD")

        def manager(i: int) -> Any:
            return entry.objects.send(f"mgr:{i % 50}", "ADD", create=True)

        def field_on(alias: str) -> Callable[[int], Any]:
            rows = [Order.objects.using(alias).create() for _ in range(50)]
            return lambda i: rows[i % 50].status.send("ADD")

        cases: list[tuple[str, Callable[[int], Any], str | None]] = [
            ("persisted() block", bare, None),
            ("objects.send()", manager, None),
            ("order.status.send() on SQLite", field_on("default"), "default"),
        ]
        if has_pg:
            cases.append(("order.status.send() on PostgreSQL", field_on("postgres"), "postgres"))
        results = []
        for name, fn, alias in cases:
            found = {"case": name, **costs(fn, rt, alias),
                     "us_per_send": round(per_send(fn, args.number, args.repeat), 1)}  # fmt: skip
            results.append(found)
            print(json.dumps(found))
        if has_pg:
            from django.db import connections

            connections["postgres"].close()
            _pg_admin(f"DROP DATABASE IF EXISTS {BENCH_DB}")
        machine = {"python": platform.python_version(), "cpu": platform.processor() or
                   platform.machine(), "cores": os.cpu_count()}  # fmt: skip
        if args.json:
            Path(args.json).write_text(
                json.dumps({"machine": machine, "results": results}, indent=2)
            )


if __name__ == "__main__":
    main()
