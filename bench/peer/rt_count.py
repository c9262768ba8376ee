#!/usr/bin/env python3
"""Count Redis round trips for ONE persisted send, two independent ways.

1. Client side: a ``redis.Connection`` subclass counts every
   ``send_packed_command`` (one per request/response cycle; a pipeline is
   one) and records the command names.
2. Server side (``--monitor``, needs ``redis-cli``): ``MONITOR`` on the
   same server; commands from our client's port between two ECHO markers
   sent by a second client are listed. Commands a Lua script runs are
   shown separately (they are not round trips).

Scenario per row:  with persisted(store, key, machine, lock=..., plugins=...)
                      as m: m.send("ADD", idempotency_key=..., actor=...)
measured at steady state (scripts already loaded, record already exists);
``--new-key`` also measures the first send to a fresh key.

Uses the adapter interface of ``harness.py`` (default: the peer
xstate-statemachine, in its own virtualenv). Needs a real redis-server:
``--redis-url`` or ``--start-redis``. The selected database is FLUSHED.

Usage (from the repository root)::

    .venv-peer/bin/python bench/peer/rt_count.py --start-redis --monitor --new-key
    python bench/peer/rt_count.py --start-redis --monitor --new-key \\
        --adapter bench.xsm_adapter:AdapterKeyAtOpen
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import subprocess
import sys
import time
from typing import Any

import redis
from harness import load_adapter, redis_server  # this directory: sys.path[0]


class CountingConnection(redis.Connection):
    log: list[list[str]] = []
    enabled = False

    def send_command(self, *args: Any, **kw: Any) -> None:
        if CountingConnection.enabled:
            CountingConnection.log.append([_s(a) for a in args[:2]])
        super().send_command(*args, **kw)

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if CountingConnection.enabled:
            # a pipeline arrives here without going through send_command
            CountingConnection.trips += 1
        super().send_packed_command(command, check_health)


CountingConnection.trips = 0  # type: ignore[attr-defined]


def _s(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        v = v.decode("utf-8", "replace")
    return str(v)[:60]


def upstream_script_names() -> dict[str, str]:
    """sha1 -> readable name for the peer's Lua scripts (best effort)."""
    out: dict[str, str] = {}
    with contextlib.suppress(Exception):
        from xstate_statemachine.contrib.redis import _layout, inbox, log

        for mod, names in (
            (_layout, ["_SAVE", "_FORGET", "_DELETE", "_PRUNE", "_UNLOCK", "_SCHEMA"]),
            (inbox, ["_CLAIM", "_MARK", "_GET", "_RELEASE", "_PURGE", "_FORGET"]),
            (log, ["_APPEND", "_XDEL_AND_DROP"]),
        ):
            for n in names:
                src = getattr(mod, n, None)
                if isinstance(src, str):
                    sha = hashlib.sha1(src.encode()).hexdigest()
                    out[sha] = f"{mod.__name__.rsplit('.', 1)[-1]}.{n}"
    return out


def describe(cmds: list[list[str]], names: dict[str, str]) -> list[str]:
    out = []
    for c in cmds:
        if c and c[0].upper() == "EVALSHA" and len(c) > 1:
            out.append(f"EVALSHA({names.get(c[1], c[1][:8])})")
        else:
            out.append(c[0].upper() if c else "?")
    return out


class Monitor:
    """``redis-cli MONITOR`` in a child process (stopped by pid)."""

    def __init__(self, host: str, port: int) -> None:
        exe = shutil.which("redis-cli")
        if exe is None:
            raise SystemExit("redis-cli not found")
        self.proc = subprocess.Popen(
            [exe, "-h", host, "-p", str(port), "monitor"],
            stdout=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        time.sleep(0.3)

    def stop(self) -> list[str]:
        time.sleep(0.3)
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=5)
        return out.splitlines()


def monitor_slice(lines: list[str], begin: str, end: str, port: int) -> tuple[list[str], list[str]]:
    """(our client's commands, Lua-internal commands) between markers."""
    inside = False
    ours, lua = [], []
    for ln in lines:
        if f'"{begin}"' in ln:
            inside = True
            continue
        if f'"{end}"' in ln:
            break
        if not inside:
            continue
        try:
            head, cmd = ln.split("] ", 1)
            who = head.split("[", 1)[1].split(" ", 1)[1]
        except (IndexError, ValueError):
            continue
        name = cmd.split(" ", 1)[0].strip('"').upper()
        if who == "lua":
            lua.append(name)
        elif who.endswith(f":{port}"):
            ours.append(name)
    return ours, lua


def run(adapter: Any, url: str, use_monitor: bool, new_key: bool) -> list[dict[str, Any]]:
    pool = redis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    client = redis.Redis(connection_pool=pool)
    plain = redis.Redis.from_url(url)
    # an adapter may name its own scripts (sha1 -> name); else the peer's
    names = getattr(adapter, "script_names", upstream_script_names)()
    rows = []
    for plugins in (False, True):
        for lock in ("optimistic", "pessimistic"):
            for first in (False, True) if new_key else (False,):
                plain.flushdb()
                sender = adapter.make_sender(client, "rt", plugins, lock)
                n = [0]

                def one(key: str, sender: Any = sender, n: list[int] = n) -> Any:
                    n[0] += 1
                    return sender(key, "ADD", idempotency_key=f"k{n[0]}", actor="alice")

                # warm: load every script, create the record
                for _ in range(3):
                    one("warm")
                one("order-1")
                key = "order-new" if first else "order-1"
                # our client's local port, for MONITOR filtering
                port = int(client.client_info()["addr"].rsplit(":", 1)[1])
                mon = None
                if use_monitor:
                    host, mport = (
                        pool.connection_kwargs["host"],
                        int(pool.connection_kwargs["port"]),
                    )
                    mon = Monitor(host, mport)
                    plain.echo("xsm-rt-begin")
                CountingConnection.log = []
                CountingConnection.trips = 0  # type: ignore[attr-defined]
                CountingConnection.enabled = True
                t0 = time.perf_counter()
                rc = one(key)
                dt = (time.perf_counter() - t0) * 1e6
                CountingConnection.enabled = False
                row: dict[str, Any] = {
                    "plugins": "idempotency+audit" if plugins else "none",
                    "lock": lock,
                    "record": "new key" if first else "existing",
                    "round_trips_client": CountingConnection.trips,  # type: ignore[attr-defined]
                    "commands_client": describe(CountingConnection.log, names),
                    "us_this_send": round(dt, 1),
                    "receipt_error": repr(getattr(rc, "error", None)),
                }
                if mon is not None:
                    plain.echo("xsm-rt-end")
                    ours, lua = monitor_slice(mon.stop(), "xsm-rt-begin", "xsm-rt-end", port)
                    row["round_trips_monitor"] = len(ours)
                    row["commands_monitor"] = ours
                    row["lua_internal_commands"] = len(lua)
                rows.append(row)
    plain.flushdb()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--adapter")
    ap.add_argument("--redis-url")
    ap.add_argument("--start-redis", action="store_true")
    ap.add_argument("--monitor", action="store_true")
    ap.add_argument("--new-key", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    adapter = load_adapter(a.adapter)
    with contextlib.ExitStack() as stack:
        url = a.redis_url
        if url is None:
            if not a.start_redis:
                ap.error("--redis-url or --start-redis")
            url = stack.enter_context(redis_server())
        rows = run(adapter, url, a.monitor, a.new_key)
    for r in rows:
        print(json.dumps(r))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
