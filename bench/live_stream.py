"""What does the live stream (``/_xsm/stream/<key>``) cost, and how fast does
a commit reach the streams that follow it?

On a throw-away redis-server (free loopback port, stopped by pid), with two
server processes as in tests/stream: uvicorn serves the streams (ASGI, one
process), gunicorn (sync workers) takes the commits, so every event crosses
processes through Redis.

* ``fanout``: N streams open (1, 100, 1000), either all on one instance
  (``one-key``: each commit goes to N streams) or one instance each
  (``own-keys``: a commit to one of them); ``--commits`` commits through
  gunicorn, spaced ``--gap-ms`` apart. Latency of each delivered event =
  when this process read it minus the record's ``timestamp_ms`` (stamped
  by the committing process just before its COMMIT; same clock):
  commit -> event received, p50 / p99 / max in ms.
* ``idle``: N streams open on their own instances and nothing committed
  for ``--idle-s``: what they cost Redis (CPU, commands/s, connections,
  memory) and the uvicorn process (CPU), per open stream. Production
  settings: HEARTBEAT_S 15, SOCKET_TIMEOUT_S 5 (an XREAD waits at most
  2.5 s).
* ``readers``: the choice of django_xsm.stream, without HTTP, in one
  asyncio process: N followers (own instances) each in its own blocking
  ``XREAD`` (AsyncRedisLog.wait, what the stream does) against one
  shared reader per process (one ``XREAD BLOCK`` over all followed
  streams, re-issued after every wake-up, handing each record to its
  followers), with the followers on their own instances or all on one.
  Records appended at ``--rate``/s to random followed instances for
  ``--seconds``: latency p50/p99, Redis CPU and commands, client CPU.

Usage::

    .venv/bin/python bench/live_stream.py [--streams 1,100,1000] [--commits 40]
        [--idle-s 20] [--rate 50] [--seconds 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.redis.servers import RedisServer  # noqa: E402
from tests.stream.servers import Server, environment, migrate, request, running  # noqa: E402

PREFIX = "bench-live"
#: The followers' socket timeout in the readers part (an XREAD waits at most half of it).
SOCKET_TIMEOUT_S = float(os.environ.get("BENCH_SOCKET_TIMEOUT_S", "5"))
TOKEN = {"X-Test-Token": "let-me-in"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(ms: list[float]) -> dict[str, Any]:
    if not ms:
        return {"events": 0}
    return {
        "events": len(ms),
        "p50_ms": round(pct(ms, 0.50), 2),
        "p99_ms": round(pct(ms, 0.99), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RedisInfo:
    def __init__(self, port: int) -> None:
        import redis

        self.client = redis.Redis(port=port)

    def blocked(self) -> int:
        return int(self.client.info("clients")["blocked_clients"])

    async def settle(self, n: int, timeout: float = 120) -> None:
        """Until ``n`` clients wait in a blocking read (every follower has
        connected and sent its first XREAD): connecting is not measured."""
        deadline = time.monotonic() + timeout
        while self.blocked() < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.blocked()} of {n} readers are waiting")
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)

    def sample(self) -> dict[str, float]:
        info = self.client.info()
        return {
            "cpu_s": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
            "commands": float(info["total_commands_processed"]),
            "clients": float(info["connected_clients"]),
            "memory": float(info["used_memory"]),
        }


# --- an SSE client for many connections ------------------------------------------------


class Follower:
    """One ``GET /_xsm/stream/<key>`` (HTTP/1.0: no chunking, the body ends
    with the connection), recording each transition's latency."""

    def __init__(self, port: int, key: str, sink: list[float]) -> None:
        self.port, self.key, self.sink = port, key, sink
        self.opened = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.retries = 0

    async def run(self) -> None:
        for _ in range(10):  # a 503 (busy or Redis slow to accept): retry as a page would
            reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            head = f"GET /_xsm/stream/{self.key} HTTP/1.0\r\nX-Test-Token: let-me-in\r\n\r\n"
            self.writer.write(head.encode())
            await self.writer.drain()
            status = await reader.readline()
            if b" 200 " in status:
                break
            self.retries += 1
            self.writer.close()
            await asyncio.sleep(random.uniform(0.5, 1.5))
        else:
            raise RuntimeError(f"{self.key}: {status!r}")
        while (await reader.readline()).strip():
            pass  # headers
        data = b""
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith((b":", b"retry:")):
                self.opened.set()
            elif line.startswith(b"data: "):
                data = line[6:]
            elif line == b"\n" and data:
                now = time.time()
                record = json.loads(data)
                self.sink.append((now - record["timestamp_ms"] / 1000) * 1000)
                data = b""

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.task is not None:
            self.task.cancel()


async def open_followers(port: int, keys: list[str], sink: list[float]) -> list[Follower]:
    followers = [Follower(port, key, sink) for key in keys]
    for i, f in enumerate(followers):
        f.start()
        if i % 25 == 24:
            await asyncio.sleep(0.1)  # 250 opens/s: a burst of 1000 at once times out
    await asyncio.wait_for(asyncio.gather(*(f.opened.wait() for f in followers)), timeout=300)
    retried = sum(f.retries for f in followers)
    if retried:
        print(f"# {retried} opens of {len(followers)} were retried after a 503", flush=True)
    return followers


def commit(server: Server, tid: str) -> None:
    status, _, body = request(
        server, "POST", f"/t/{tid}/bump", headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    if status != 201:
        raise RuntimeError(f"commit {tid}: {status} {body[:200]!r}")


async def fanout(
    asgi: Server, wsgi: Server, redis_port: int, n: int, mode: str, commits: int, gap_ms: int
) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    tids = [f"{run}-0"] if mode == "one-key" else [f"{run}-{i}" for i in range(n)]
    for tid in tids:
        commit(wsgi, tid)  # the instances exist before their streams open
    keys = [f"ticket:{tids[0]}"] * n if mode == "one-key" else [f"ticket:{t}" for t in tids]
    sink: list[float] = []
    followers = await open_followers(asgi.port, keys, sink)
    # a process reads each followed instance once (django_xsm.stream's feeds)
    await RedisInfo(redis_port).settle(len(set(keys)))
    try:
        loop = asyncio.get_running_loop()
        for _ in range(commits):
            await loop.run_in_executor(None, commit, wsgi, random.choice(tids))
            await asyncio.sleep(gap_ms / 1000 * random.uniform(0.5, 1.5))
        expected = commits * (n if mode == "one-key" else 1)
        deadline = time.monotonic() + 30
        while len(sink) < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        for f in followers:
            f.close()
        await asyncio.sleep(0.5)
    return {"streams": n, "mode": mode, "commits": commits, "expected": expected, **summary(sink)}


async def idle(
    asgi: Server, wsgi: Server, info: RedisInfo, n: int, seconds: float
) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    tids = [f"{run}-{i}" for i in range(n)]
    for tid in tids:
        commit(wsgi, tid)
    sink: list[float] = []
    before_open = info.sample()
    followers = await open_followers(asgi.port, [f"ticket:{t}" for t in tids], sink)
    await info.settle(n)
    first, cpu0, t0 = info.sample(), proc_cpu_s(asgi.proc.pid), time.monotonic()  # type: ignore[union-attr]
    await asyncio.sleep(seconds)
    last, cpu1, t1 = info.sample(), proc_cpu_s(asgi.proc.pid), time.monotonic()  # type: ignore[union-attr]
    for f in followers:
        f.close()
    await asyncio.sleep(1)
    span = t1 - t0
    return {
        "streams": n,
        "seconds": round(span, 1),
        "redis_cpu_ms_per_s": round((last["cpu_s"] - first["cpu_s"]) * 1000 / span, 3),
        "redis_commands_per_s": round((last["commands"] - first["commands"]) / span, 1),
        "redis_clients": int(last["clients"]),
        "redis_memory_kib_per_stream": round(
            (first["memory"] - before_open["memory"]) / 1024 / n, 2
        ),
        "uvicorn_cpu_ms_per_s": round((cpu1 - cpu0) * 1000 / span, 3),
    }


def run_http(args: argparse.Namespace, server: RedisServer) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-live-"))
    env = environment(
        server.url,
        PREFIX,
        folder / "db.sqlite3",
        XSM_TEST_MAX_STREAMS="5000",
        XSM_TEST_HEARTBEAT_S="15",
        XSM_TEST_SOCKET_TIMEOUT_S="5",
    )
    migrate(env)
    info = RedisInfo(server.port)
    out: dict[str, Any] = {"fanout": [], "idle": []}
    with running(Server("uvicorn", env), Server("gunicorn", env)) as (asgi, wsgi):
        for n in args.streams:
            for mode in ("own-keys", "one-key"):
                row = asyncio.run(
                    fanout(asgi, wsgi, server.port, n, mode, args.commits, args.gap_ms)
                )
                print(json.dumps(row), flush=True)
                out["fanout"].append(row)
        for n in args.streams:
            row = asyncio.run(idle(asgi, wsgi, info, n, args.idle_s))
            print(json.dumps(row), flush=True)
            out["idle"].append(row)
    return out


# --- per-connection XREAD against one shared reader --------------------------------------


async def readers(
    server: RedisServer, n: int, style: str, rate: float, seconds: float, mode: str
) -> Any:
    import redis
    import redis.asyncio

    from django_xsm.persistence.records import LogEntry
    from django_xsm.redis import AsyncRedisLog, RedisLog

    prefix = f"bench-readers-{uuid.uuid4().hex[:6]}"
    aclient = redis.asyncio.Redis(
        port=server.port, socket_timeout=SOCKET_TIMEOUT_S, max_connections=n + 50
    )
    log = AsyncRedisLog(aclient, prefix=prefix)
    sync_client = redis.Redis(port=server.port, socket_timeout=5)
    writer = RedisLog(sync_client, prefix=prefix)
    keys = [f"k:{i}" for i in range(n)] if mode == "own-keys" else ["k:0"] * n
    watched = sorted(set(keys))

    def entry() -> LogEntry:
        return LogEntry("E", {}, "bench", "", "a", "b", "", "", int(time.time() * 1000))

    for key in watched:
        writer.append_next(key, entry(), version=1)
    sink: list[float] = []

    def took(records: list[Any]) -> None:
        now = time.time()
        sink.extend((now - r.timestamp_ms / 1000) * 1000 for r in records)

    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    if style == "per-connection":

        async def follow(key: str) -> None:
            after = 1
            while not stop.is_set():
                found = await log.wait(key, after_seq=after, timeout_s=15)
                if found:
                    took(found)
                    after = found[-1].seq

        tasks = [asyncio.create_task(follow(k)) for k in keys]
    else:
        layout = KeyLayoutOf(prefix)
        cursors = {layout.log(k): "1-0" for k in watched}
        fanout = {layout.log(k): keys.count(k) for k in watched}

        async def shared() -> None:
            from django_xsm.redis import calls

            reader = redis.asyncio.Redis(port=server.port, socket_timeout=5)
            while not stop.is_set():
                reply = await reader.xread(cursors, block=2500, count=100)
                for raw, rows in reply or []:
                    name = raw.decode()
                    key = name.split(":log:", 1)[1]
                    found = calls.parse_stream_rows(key, rows)
                    if found:
                        cursors[name] = f"{found[-1].seq}-0"
                        for _ in range(fanout[name]):  # a real reader: each follower's queue
                            took(found)
            await reader.aclose()

        tasks = [asyncio.create_task(shared())]
    info = RedisInfo(server.port)
    await info.settle(n if style == "per-connection" else 1)
    first, cpu0, t0 = info.sample(), time.process_time(), time.monotonic()
    done = threading.Event()

    def append() -> None:
        while not done.is_set():
            writer.append_next(random.choice(watched), entry(), version=1)
            time.sleep(1 / rate)

    appender = threading.Thread(target=append)
    appender.start()
    await asyncio.sleep(seconds)
    done.set()
    appender.join()
    await asyncio.sleep(0.5)
    last, cpu1, t1 = info.sample(), time.process_time(), time.monotonic()
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await aclient.aclose()
    sync_client.close()
    span = t1 - t0
    return {
        "style": style,
        "mode": mode,
        "followers": n,
        "appends_per_s": rate,
        **summary(sink),
        "redis_cpu_ms_per_s": round((last["cpu_s"] - first["cpu_s"]) * 1000 / span, 2),
        "redis_commands_per_s": round((last["commands"] - first["commands"]) / span, 1),
        "redis_clients": int(last["clients"]),
        "client_cpu_ms_per_s": round((cpu1 - cpu0) * 1000 / span, 2),
    }


def KeyLayoutOf(prefix: str) -> Any:  # the layout of a new namespace
    from django_xsm.redis.keys import DEFAULT_BUCKETS, KeyLayout

    return KeyLayout(prefix, DEFAULT_BUCKETS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="1,100,1000")
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--gap-ms", type=int, default=100)
    parser.add_argument("--idle-s", type=float, default=20)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--only", choices=["http", "readers"], default=None)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    args.streams = [int(x) for x in args.streams.split(",")]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.settings")
    result: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_1m_at_start": os.getloadavg()[0],
        }
    }
    server = RedisServer().start()
    try:
        if args.only in (None, "readers"):
            result["readers"] = []
            for mode in ("own-keys", "one-key"):
                for n in args.streams:
                    for style in ("per-connection", "shared"):
                        row = asyncio.run(readers(server, n, style, args.rate, args.seconds, mode))
                        print(json.dumps(row), flush=True)
                        result["readers"].append(row)
        if args.only in (None, "http"):
            result.update(run_http(args, server))
    finally:
        server.stop()
    result["machine"]["load_1m_at_end"] = os.getloadavg()[0]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
