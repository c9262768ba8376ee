"""What does the outbox cost, and how fast do workers drain it?

On a throw-away redis-server (free loopback port, stopped by pid):

* ``request``: µs per idempotent, audited block (key at open, one ADD) that
  emits nothing, next to the same block whose transition emits one event
  (the COMMIT script then also appends the outbox entry: still two round
  trips); the median of ``--repeat`` runs of ``--number`` blocks.
* ``drain``: entries/s delivered to a no-op handler by one worker, and by
  two worker processes sharing the consumer group (``manage.py
  xsm_run_outbox --once`` each, started together; wall time from the
  first start to the last exit, start-up included, and the in-process
  drain time of one worker alone).

Usage::

    .venv/bin/python bench/outbox.py [--number 1000] [--repeat 5] [--entries 5000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHART: dict[str, Any] = {
    "id": "order",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {
            "on": {
                "ADD": {"target": "cart", "actions": "inc"},
                "PAY": {
                    "target": "cart",
                    "actions": ["inc", {"type": "xstate.emit", "event": {"type": "order.paid"}}],
                },
            }
        }
    },
}


def machine() -> Any:
    from django_xsm.engine import MachineLogic, create_machine

    def inc(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        ctx["items"] += 1

    return create_machine(CHART, logic=MachineLogic(actions={"inc": inc}))


def blocks(url: str, prefix: str, event: str, number: int, tag: str) -> float:
    """µs per keyed, audited block sending ``event`` once, on new keys."""
    from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, persisted
    from django_xsm.persistence.idempotency import event_fingerprint
    from django_xsm.redis import RedisInbox, RedisLog, RedisStore

    store = RedisStore(url, prefix=prefix)
    plugins = [
        IdempotencyPlugin(RedisInbox(url, prefix=prefix)),
        AuditPlugin(RedisLog(url, prefix=prefix)),
    ]
    m = machine()
    fingerprint = event_fingerprint(event, {})
    started = time.perf_counter()
    for i in range(number):
        with persisted(
            store, f"{tag}:{i}", m, plugins=plugins, idempotency_key=f"{tag}-{i}",
            fingerprint=fingerprint, principal="bench",
        ) as block:  # fmt: skip
            block.send(event)
    return (time.perf_counter() - started) / number * 1e6


def drain_processes(url: str, prefix: str, workers: int) -> float:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.outbox_settings",
        "XSM_BENCH_URL": url,
        "XSM_BENCH_PREFIX": prefix,
    }
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "django",
                "xsm_run_outbox",
                "--once",
                "--batch",
                "200",
                "--consumer",
                f"bench-{n}",
                "-v",
                "0",
            ],
            cwd=ROOT,
            env=env,
        )
        for n in range(workers)
    ]
    for proc in procs:
        if proc.wait(timeout=600) != 0:
            raise SystemExit(f"a worker exited {proc.returncode}")
    return time.perf_counter() - started


def emit(url: str, prefix: str, entries: int) -> None:
    blocks(url, prefix, "PAY", entries, f"fill{time.time_ns()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from bench.model_field import redis_server

    out: dict[str, Any] = {"python": platform.python_version(), "machine": platform.platform()}
    with redis_server() as url:
        blocks(url, "warm", "ADD", 200, "warm")
        blocks(url, "warm", "PAY", 200, "warmp")
        plain, emitting, added = [], [], []
        for r in range(args.repeat):
            # ABBA, so drift on a shared machine cancels in each pair's difference
            a1 = blocks(url, f"b{r}", "ADD", args.number, f"p1-{r}")
            b1 = blocks(url, f"b{r}", "PAY", args.number, f"e1-{r}")
            b2 = blocks(url, f"b{r}", "PAY", args.number, f"e2-{r}")
            a2 = blocks(url, f"b{r}", "ADD", args.number, f"p2-{r}")
            plain += [a1, a2]
            emitting += [b1, b2]
            added.append((b1 + b2 - a1 - a2) / 2)
        out["request_us"] = {
            "no_emit": round(statistics.median(plain), 1),
            "one_emit": round(statistics.median(emitting), 1),
            "added_us_median_of_abba_pairs": round(statistics.median(added), 1),
            "added_us_pairs": [round(x, 1) for x in added],
        }
        for workers in (1, 2):
            prefix = f"drain{workers}"
            emit(url, prefix, args.entries)
            seconds = drain_processes(url, prefix, workers)
            out[f"drain_{workers}_workers"] = {
                "entries": args.entries,
                "wall_s": round(seconds, 2),
                "entries_per_s": round(args.entries / seconds),
            }
        os.environ.update(
            DJANGO_SETTINGS_MODULE="bench.outbox_settings",
            XSM_BENCH_URL=url,
            XSM_BENCH_PREFIX="drain-inproc",
        )
        import django

        django.setup()
        from django_xsm.outbox import OutboxWorker, drain

        emit(url, "drain-inproc", args.entries)
        worker = OutboxWorker.from_settings(consumer="inproc", batch=200)
        started = time.perf_counter()
        result = drain(worker)
        seconds = time.perf_counter() - started
        out["drain_in_process"] = {
            "entries": result.delivered,
            "seconds": round(seconds, 3),
            "entries_per_s": round(result.delivered / seconds),
            "us_per_entry": round(seconds / max(result.delivered, 1) * 1e6, 1),
        }
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
