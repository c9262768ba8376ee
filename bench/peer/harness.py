#!/usr/bin/env python3
"""Side-by-side harness: statechart engine + Redis-persisted sends.

Self-contained (stdlib + whatever the chosen adapter imports), so the same
file runs in the peer's own virtualenv and in django-xsm's. The default
adapter drives the PyPI package ``xstate-statemachine`` (0.11.0 was
measured; it is imported only when this adapter runs, in the peer's
virtualenv); ``--adapter module:factory`` picks another adapter, for
django-xsm ``bench.xsm_adapter:Adapter`` (run from the repository root). An
adapter is any object with the attributes documented in
``UpstreamAdapter`` below. ``bench/peer/run.py`` creates the peer's
virtualenv and runs both sides in alternating rounds.

What it measures
  engine     steady-state ``send()`` throughput of a small order machine
             (cart --ADD/inc--> cart, PAY -> paid) on the sync engine,
             fire-and-forget and with a receipt (wait=True).
  persisted  one ``with persisted(store, key, machine, ...) as m:
             m.send("ADD", idempotency_key=..., actor=...)`` per request,
             timed per request, against a real redis-server (loopback)
             and/or fakeredis, for every (plugins x lock) combination.
  imports    cold import time of the adapter's modules (fresh subprocess
             each time; the bare interpreter start-up is subtracted).

Examples (from the repository root)
  .venv-peer/bin/python bench/peer/harness.py --persisted --start-redis --json peer.json
  python bench/peer/harness.py --persisted --start-redis \\
      --adapter bench.xsm_adapter:AdapterKeyAtOpen --json xsm.json
  python bench/peer/harness.py --engine --engine-events 200000 --adapter bench.xsm_adapter:Adapter

``--start-redis`` launches ``redis-server`` on a free loopback port (no
persistence, background), and stops it by its pid at exit. Without a URL
and without ``--start-redis`` only fakeredis is measured.

⚠️ The harness FLUSHES the selected Redis database before each scenario:
use a throw-away server or database number.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
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
from typing import Any

# -----------------------------------------------------------------------------
# The machine under test (XState JSON) -- shared by every adapter.
# -----------------------------------------------------------------------------
ORDER_CHART: dict[str, Any] = {
    "id": "order",
    "version": "1",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {
            "on": {
                "ADD": {"target": "cart", "actions": "inc"},
                "PAY": "paid",
            }
        },
        "paid": {"type": "final"},
    },
}


def _inc(ctx: dict[str, Any]) -> None:
    ctx["items"] = ctx.get("items", 0) + 1


# -----------------------------------------------------------------------------
# Adapter for xstate-statemachine (the peer)
# -----------------------------------------------------------------------------
class UpstreamAdapter:
    """The adapter interface, implemented for ``xstate_statemachine``.

    Attributes / methods an adapter provides:
      name                    label in the report
      version()               library version string
      import_targets          {label: python statement} timed cold
      make_engine()           -> (send(event_type, wait, **payload), close())
      make_sender(client, prefix, plugins, lock)
                              -> send(key, event_type, **payload) doing ONE
                                 persisted block with ONE send inside
      snapshot_size(client, prefix, key) -> bytes of the stored snapshot
    """

    name = "xstate-statemachine"

    import_targets = {
        "core": "import xstate_statemachine",
        "persistence": (
            "from xstate_statemachine.persistence import persisted, IdempotencyPlugin, AuditPlugin"
        ),
        "contrib.redis": "import xstate_statemachine.contrib.redis",
        "redis-py alone": "import redis",
    }

    def version(self) -> str:
        from importlib.metadata import version

        return version("xstate-statemachine")

    def _machine(self) -> Any:
        from xstate_statemachine import MachineLogic, create_machine

        def inc(i: Any, ctx: Any, e: Any, a: Any) -> None:
            _inc(ctx)

        return create_machine(
            json.loads(json.dumps(ORDER_CHART)),
            logic=MachineLogic(actions={"inc": inc}),
        )

    def make_engine(self) -> Any:
        from xstate_statemachine import SyncInterpreter

        interp = SyncInterpreter(self._machine()).start()

        def send(event_type: str, wait: bool = False, **payload: Any) -> Any:
            return interp.send(event_type, wait=wait, **payload)

        return send, interp.stop

    def make_sender(self, client: Any, prefix: str, plugins: bool, lock: str) -> Callable[..., Any]:
        from xstate_statemachine.contrib.redis import (
            RedisInbox,
            RedisLog,
            RedisStore,
        )
        from xstate_statemachine.persistence import (
            AuditPlugin,
            IdempotencyPlugin,
            NoLock,
            OptimisticLock,
            PessimisticLock,
            persisted,
        )

        machine = self._machine()
        store = RedisStore(client, prefix=prefix)
        plug: list[Any] = []
        if plugins:
            plug = [
                IdempotencyPlugin(
                    RedisInbox(client, prefix=prefix),
                    principal=lambda e: "tenant-1",
                ),
                AuditPlugin(RedisLog(client, prefix=prefix)),
            ]
        strategy = {
            "optimistic": OptimisticLock(),
            "pessimistic": PessimisticLock(),
            "none": NoLock(),
        }[lock]

        def send(key: str, event_type: str, **payload: Any) -> Any:
            with persisted(store, key, machine, lock=strategy, plugins=plug) as m:
                return m.send(event_type, wait=True, **payload)

        return send

    def snapshot_size(self, client: Any, prefix: str, key: str) -> int:
        raw = client.hget(f"{prefix}:snap:{key}", "snapshot")
        return len(raw or b"")


def load_adapter(spec: str | None) -> Any:
    if not spec:
        return UpstreamAdapter()
    mod, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:  # adapters usually live next to the caller
        sys.path.insert(0, os.getcwd())
    obj = getattr(importlib.import_module(mod), attr or "make")
    if isinstance(obj, type):  # an adapter class
        return obj()
    if callable(obj) and not hasattr(obj, "make_sender"):  # a factory
        return obj()
    return obj  # an adapter instance


# -----------------------------------------------------------------------------
# Helpers
# -----------------------------------------------------------------------------
def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize_us(samples_ns: list[int]) -> dict[str, float]:
    us = [x / 1000.0 for x in samples_ns]
    return {
        "n": len(us),
        "median_us": round(statistics.median(us), 1),
        "mean_us": round(statistics.fmean(us), 1),
        "p90_us": round(pct(us, 0.90), 1),
        "p99_us": round(pct(us, 0.99), 1),
        "min_us": round(min(us), 1),
        "per_s_at_median": round(1e6 / statistics.median(us), 0),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def redis_server(binary: str = "redis-server") -> Iterator[str]:
    """Start a throw-away redis-server on loopback; stop it by pid."""
    exe = shutil.which(binary)
    if exe is None:
        raise SystemExit(f"{binary} not found (apt-get install redis-server)")
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="xsm-bench-redis-")
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tmp,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 10
        while time.time() < deadline:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()  # our own child, by pid
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


# -----------------------------------------------------------------------------
# (a) engine
# -----------------------------------------------------------------------------
def bench_engine(adapter: Any, events: int, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wait in (False, True):
        rates = []
        for _ in range(repeats):
            send, close = adapter.make_engine()
            for _w in range(min(2000, events // 10 + 1)):  # warm-up
                send("ADD", wait)
            t0 = time.perf_counter()
            for _i in range(events):
                send("ADD", wait)
            dt = time.perf_counter() - t0
            close()
            rates.append(events / dt)
        label = "wait=True (receipt)" if wait else "wait=False"
        out[label] = {
            "events": events,
            "repeats": repeats,
            "median_events_per_s": round(statistics.median(rates)),
            "best_events_per_s": round(max(rates)),
            "median_us_per_event": round(1e6 / statistics.median(rates), 2),
        }
    return out


# -----------------------------------------------------------------------------
# (b)/(c) persisted round trip
# -----------------------------------------------------------------------------
def bench_persisted(
    adapter: Any,
    client_factory: Callable[[], Any],
    backend: str,
    sends: int,
    warmup: int,
    locks: list[str],
    key_mode: str,
) -> list[dict[str, Any]]:
    rows = []
    for plugins in (False, True):
        for lock in locks:
            client = client_factory()
            client.flushdb()
            prefix = "bench"
            send = adapter.make_sender(client, prefix, plugins, lock)
            n = 0

            def one(key: str, send: Callable[..., Any] = send) -> Any:
                nonlocal n
                n += 1
                return send(
                    key,
                    "ADD",
                    idempotency_key=f"idem-{n}",
                    actor="alice",
                )

            for i in range(warmup):
                one("warm" if key_mode == "same" else f"warm-{i}")
            samples: list[int] = []
            cpu0 = time.process_time()
            for i in range(sends):
                key = "order-1" if key_mode == "same" else f"order-{i}"
                t0 = time.perf_counter_ns()
                rc = one(key)
                samples.append(time.perf_counter_ns() - t0)
                if getattr(rc, "error", None) is not None:
                    raise RuntimeError(f"send failed: {rc!r}")
            cpu_us = (time.process_time() - cpu0) * 1e6 / max(sends, 1)
            row = {
                "backend": backend,
                "plugins": "idempotency+audit" if plugins else "none",
                "lock": lock,
                "key_mode": key_mode,
                **summarize_us(samples),
                # client-process CPU per send (engine + JSON + redis-py;
                # for fakeredis this includes the in-process "server")
                "client_cpu_us_per_send": round(cpu_us, 1),
            }
            with contextlib.suppress(Exception):
                row["snapshot_bytes"] = adapter.snapshot_size(
                    client, prefix, "order-1" if key_mode == "same" else f"order-{sends - 1}"
                )
            rows.append(row)
            with contextlib.suppress(Exception):
                client.flushdb()
    return rows


# -----------------------------------------------------------------------------
# (d) cold import
# -----------------------------------------------------------------------------
def bench_imports(adapter: Any, repeats: int) -> dict[str, Any]:
    def run(stmt: str) -> float:
        code = f"import time; t=time.perf_counter(); {stmt}; print(time.perf_counter()-t)"
        res = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
        )
        return float(res.stdout.strip().splitlines()[-1]) * 1000.0

    def wall(stmt: str) -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", stmt], check=True)
        return (time.perf_counter() - t) * 1000.0

    out: dict[str, Any] = {}
    base = [wall("pass") for _ in range(repeats)]
    out["python_startup_ms(median)"] = round(statistics.median(base), 1)
    for label, stmt in adapter.import_targets.items():
        inproc = [run(stmt) for _ in range(repeats)]
        whole = [wall(stmt) for _ in range(repeats)]
        out[label] = {
            "import_ms_median": round(statistics.median(inproc), 1),
            "import_ms_min": round(min(inproc), 1),
            "process_wall_ms_median": round(statistics.median(whole), 1),
        }
    # top self-time contributors for the heaviest target
    heavy = list(adapter.import_targets.values())[-2]
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", heavy],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in res.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = [p.strip() for p in line[len("import time:") :].split("|")]
        with contextlib.suppress(ValueError):
            rows.append((int(parts[1]), int(parts[0]), parts[2]))
    rows.sort(reverse=True)
    out["importtime_top_cumulative(us)"] = [
        {"module": m.strip(), "cumulative_us": c, "self_us": s} for c, s, m in rows[:15]
    ]
    out["modules_loaded_by_heavy_target"] = len(rows)
    return out


# -----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--adapter", help="module:factory (default: upstream)")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--engine", action="store_true")
    ap.add_argument("--persisted", action="store_true")
    ap.add_argument("--imports", action="store_true")
    ap.add_argument("--engine-events", type=int, default=100_000)
    ap.add_argument("--engine-repeats", type=int, default=5)
    ap.add_argument("--sends", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument(
        "--locks",
        default="optimistic,pessimistic",
        help="comma list of optimistic,pessimistic,none",
    )
    ap.add_argument("--key-mode", choices=("same", "fresh"), default="same")
    ap.add_argument("--redis-url", help="real Redis (DB gets FLUSHED)")
    ap.add_argument("--start-redis", action="store_true")
    ap.add_argument("--no-fakeredis", action="store_true")
    ap.add_argument("--import-repeats", type=int, default=10)
    ap.add_argument("--json", help="write the results here too")
    a = ap.parse_args(argv)
    if a.all:
        a.engine = a.persisted = a.imports = True
    if not (a.engine or a.persisted or a.imports):
        ap.error("choose --engine / --persisted / --imports / --all")

    adapter = load_adapter(a.adapter)
    report: dict[str, Any] = {
        "adapter": adapter.name,
        "library_version": adapter.version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    locks = [x.strip() for x in a.locks.split(",") if x.strip()]

    if a.engine:
        report["engine"] = bench_engine(adapter, a.engine_events, a.engine_repeats)
        print(json.dumps({"engine": report["engine"]}, indent=1), flush=True)

    if a.persisted:
        rows: list[dict[str, Any]] = []
        with contextlib.ExitStack() as stack:
            url = a.redis_url
            if url is None and a.start_redis:
                url = stack.enter_context(redis_server())
            if url is not None:
                import redis

                info = redis.Redis.from_url(url).info("server")
                report["redis_server_version"] = info.get("redis_version")
                rows += bench_persisted(
                    adapter,
                    lambda: redis.Redis.from_url(url),
                    "redis-server(loopback)",
                    a.sends,
                    a.warmup,
                    locks,
                    a.key_mode,
                )
            if not a.no_fakeredis:
                import fakeredis

                server = fakeredis.FakeServer()
                rows += bench_persisted(
                    adapter,
                    lambda: fakeredis.FakeRedis(server=server),
                    "fakeredis(in-process)",
                    a.sends,
                    a.warmup,
                    locks,
                    a.key_mode,
                )
        report["persisted"] = rows
        for r in rows:
            print(json.dumps(r), flush=True)

    if a.imports:
        report["imports"] = bench_imports(adapter, a.import_repeats)
        print(json.dumps({"imports": report["imports"]}, indent=1))

    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
