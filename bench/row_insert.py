"""What does a ``StatechartField`` add to a row's INSERT?

A row of a model with the field gets its Redis instance once the INSERT
commits (``docs/models.md``, "When the instance is created"): one
``persisted()`` block that starts the machine and commits it (two Redis
round trips), then the fenced ``UPDATE`` that moves the row to version 1.
This measures ``Model.objects.create()`` in autocommit on PostgreSQL
(127.0.0.1:5432) against a real Redis (a throw-away ``redis-server`` on a
free loopback port, stopped by pid, or ``XSM_REDIS_URL``), for

* ``plain`` — a model with the same integer column and no field;
* ``field`` — ``tests.fieldapp.models.Order`` (``status =
  StatechartField(machine="shop")``): INSERT, creation, UPDATE;
* ``block`` — the creation's block alone, on keys no row has
  (``objects.open(key)`` + ``save_created()``): the Redis part of it.

The two run interleaved in one process: ``--rounds`` rounds of
``--number`` inserts each, the order flipped every other round (ABBA), so
a busy machine's drift hits both alike, after 20 warm-up inserts of each.
Prints one JSON row per round and variant, then the median, minimum and
maximum µs per insert of each, and the SQL statements and Redis round
trips of one insert.

Usage::

    .venv/bin/python bench/row_insert.py [--number 300] [--rounds 9] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_field import BENCH_DB, RoundTrips, _pg_admin, redis_server, setup_django


def plain_model() -> Any:
    """A model like Order without the field, its table created."""
    from django.db import connections, models

    class PlainRow(models.Model):
        total = models.PositiveIntegerField(default=0)

        class Meta:
            app_label = "fieldapp"
            db_table = "bench_plain_row"

    with connections["postgres"].schema_editor() as editor:
        editor.create_model(PlainRow)
    return PlainRow


def per_insert(insert: Callable[[int], Any], number: int) -> float:
    start = time.perf_counter()
    for i in range(number):
        insert(i)
    return (time.perf_counter() - start) / number * 1e6


def costs(insert: Callable[[int], Any], rt: RoundTrips) -> dict[str, int]:
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    before = rt.count
    with CaptureQueriesContext(connections["postgres"]) as queries:
        insert(0)
    if os.environ.get("BENCH_SHOW_SQL"):
        for query in queries.captured_queries:
            print(query["sql"][:160], file=sys.stderr)
    return {"round_trips": rt.count - before, "sql": len(queries.captured_queries)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=300, help="inserts per round and variant")
    parser.add_argument("--rounds", type=int, default=9, help="measured rounds")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, redis_server() as url:
        if not setup_django(url, str(Path(tmp) / "bench.sqlite3")):
            raise SystemExit("no PostgreSQL answers on 127.0.0.1:5432: nothing to measure")
        from django.db import connections

        from django_xsm.registry import machines
        from tests.fieldapp.models import Order

        plain = plain_model()
        rt = RoundTrips()
        shop = machines["shop"].objects
        blocks = iter(range(10**9))

        def block(i: int) -> None:
            with shop.open(f"bench-new:{next(blocks)}") as b:
                b.save_created()

        variants: dict[str, Callable[[int], Any]] = {
            "plain": lambda i: plain.objects.using("postgres").create(total=i),
            "field": lambda i: Order.objects.using("postgres").create(total=i),
            "block": block,
        }
        order = list(variants)
        for name in order:  # warm-up: connections, scripts, the namespace marker
            per_insert(variants[name], 20)
        found = {name: costs(fn, rt) for name, fn in variants.items()}
        runs: dict[str, list[float]] = {name: [] for name in order}
        for r in range(1, args.rounds + 1):
            for name in order if r % 2 else reversed(order):
                us = per_insert(variants[name], args.number)
                runs[name].append(us)
                print(json.dumps({"round": r, "variant": name, "us_per_insert": round(us, 1)}))
        summary = {
            name: {
                "median_us": round(statistics.median(values), 1),
                "min_us": round(min(values), 1),
                "max_us": round(max(values), 1),
                **found[name],
            }
            for name, values in runs.items()
        }
        added = summary["field"]["median_us"] - summary["plain"]["median_us"]
        print(json.dumps({"summary": summary, "field_adds_us": round(added, 1)}))
        connections["postgres"].close()
        _pg_admin(f"DROP DATABASE IF EXISTS {BENCH_DB}")
        machine = {
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_1m": round(os.getloadavg()[0], 2),
        }
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {"machine": machine, "args": vars(args), "rounds": runs, "summary": summary},
                    indent=2,
                )
            )


if __name__ == "__main__":
    main()
