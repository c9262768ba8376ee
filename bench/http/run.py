"""Full-stack HTTP benchmark: one idempotent, audited PAY per request.

Three Django sites answer the same ``POST /orders/<id>/pay`` (see
``README.md``): django-xsm (``@stateful_view``, Redis), django-fsm-2 +
django-fsm-log (PostgreSQL) and xstate-statemachine (the peer, Redis).
For every stack this script starts a fresh store (a redis-server of its
own on a free loopback port with ``appendonly yes`` / ``appendfsync
everysec``, or a database of its own on 127.0.0.1:5432), seeds orders,
starts the server on a free loopback port (stopped by pid), warms up, runs
``wrk`` for each workload, replays a sample of keys, counts the applied
transitions against the 2xx answers, and writes raw outputs and a JSON
summary.

Usage (from the repository root)::

    # once: the two virtualenvs .venv-http and .venv-http-peer (never the
    # project's), wrk
    python3 bench/http/run.py setup
    # a round of every stack and workload (about 6 minutes)
    .venv-http/bin/python bench/http/run.py bench --rounds 1
    # a subset, shorter
    .venv-http/bin/python bench/http/run.py bench --stacks xsm,fsm --workloads hot -d 5
    # py-spy on one gunicorn worker of django-xsm (not a throughput figure)
    .venv-http/bin/python bench/http/run.py profile --stack xsm --workload many
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = ROOT / "bench" / "results" / "http"
# the benchmark's own virtualenvs (never the project's), in the clone
# (".venv-*" is ignored by git); BENCH_VENV / PEER_VENV put them elsewhere
BENCH_VENV = Path(os.environ.get("BENCH_VENV", ROOT / ".venv-http"))
PEER_VENV = Path(os.environ.get("PEER_VENV", ROOT / ".venv-http-peer"))
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


# --- stacks --------------------------------------------------------------------------


@dataclass
class Stack:
    name: str
    site: str  # ops.py's stack: xsm, fsm, peer
    venv: Path
    server: str  # gunicorn | uvicorn
    module: str
    env: dict[str, str] = field(default_factory=dict)
    store: str = "redis"  # redis | postgres
    label: str = ""


def stacks() -> dict[str, Stack]:
    b, p = BENCH_VENV, PEER_VENV
    return {
        s.name: s
        for s in [
            Stack(
                "xsm",
                "xsm",
                b,
                "gunicorn",
                "site_xsm.wsgi:application",
                label="django-xsm, sync view, default settings (lock 'adaptive'), "
                "gunicorn 2 sync workers",
            ),
            Stack(
                "xsm-optimistic",
                "xsm",
                b,
                "gunicorn",
                "site_xsm.wsgi:application",
                env={"BENCH_LOCK": "optimistic"},
                label="django-xsm, sync view, lock='optimistic', gunicorn 2 sync workers",
            ),
            Stack(
                "xsm-async",
                "xsm",
                b,
                "uvicorn",
                "site_xsm.asgi:application",
                label="django-xsm, async view, uvicorn 2 workers",
            ),
            Stack(
                "xsm-async-lean",
                "xsm",
                b,
                "uvicorn",
                "site_xsm.asgi:application",
                env={"BENCH_LEAN_MIDDLEWARE": "1"},
                label="django-xsm, async view, uvicorn 2 workers, XsmMiddleware only "
                "(no CommonMiddleware)",
            ),
            Stack(
                "xsm-pessimistic",
                "xsm",
                b,
                "gunicorn",
                "site_xsm.wsgi:application",
                env={"BENCH_LOCK": "pessimistic"},
                label="django-xsm, sync view, lock='pessimistic', gunicorn 2 sync workers",
            ),
            Stack(
                "fsm",
                "fsm",
                b,
                "gunicorn",
                "site_fsm.wsgi:application",
                store="postgres",
                label="django-fsm-2 + django-fsm-log, PostgreSQL "
                "(synchronous_commit as configured)",
            ),
            Stack(
                "fsm-async-commit",
                "fsm",
                b,
                "gunicorn",
                "site_fsm.wsgi:application",
                store="postgres",
                env={"BENCH_PG_SYNC_COMMIT": "off"},
                label="django-fsm-2 + django-fsm-log, PostgreSQL, synchronous_commit=off",
            ),
            Stack(
                "peer",
                "peer",
                p,
                "gunicorn",
                "site_peer.wsgi:application",
                label="xstate-statemachine 0.11.0, Redis, gunicorn 2 sync workers",
            ),
        ]
    }


DEFAULT_STACKS = "xsm,xsm-async,fsm,fsm-async-commit,peer"


# --- processes -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def stop(proc: subprocess.Popen[Any], children: list[int] | None = None) -> None:
    """Stop our own child by its pid (and, if it leaves any, its workers by pid)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    for pid in children or []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "DJANGO_SETTINGS_MODULE")
    }
    env.update(extra)
    return env


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[tuple[str, int]]:
    """A redis-server of our own: free loopback port, AOF on, fsync every second."""
    port = free_port()
    data = workdir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--dir",
            str(data),
            "--logfile",
            str(data / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        yield f"redis://127.0.0.1:{port}/0", proc.pid
    finally:
        stop(proc)


def redis_cmd(url: str, *args: str) -> str:
    port = url.rsplit(":", 1)[1].split("/", maxsplit=1)[0]
    return subprocess.run(
        ["redis-cli", "-p", port, *args], capture_output=True, text=True, check=True
    ).stdout


def pg_connect(dbname: str = "postgres", options: str = "") -> Any:
    import psycopg

    return psycopg.connect(**PG, dbname=dbname, autocommit=True, options=options)


@contextlib.contextmanager
def pg_database(name: str) -> Iterator[str]:
    with pg_connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        with pg_connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pg_settings(db: str, sync_commit: str | None) -> dict[str, str]:
    opts = f"-c synchronous_commit={sync_commit}" if sync_commit else ""
    names = [
        "server_version",
        "synchronous_commit",
        "fsync",
        "wal_sync_method",
        "wal_writer_delay",
        "commit_delay",
        "shared_buffers",
        "full_page_writes",
    ]
    with pg_connect(db, opts) as conn:
        return {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}


def pg_pids(db: str) -> tuple[list[int], list[int]]:
    """(backends serving our database, the server's WAL writer/checkpointer/bgwriter)."""
    with pg_connect() as conn:
        mine = [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (db,),
            )
        ]
        bg = [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type IN "
                "('walwriter', 'checkpointer', 'background writer')"
            )
        ]
    return mine, bg


def ops(stack: Stack, env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [str(stack.venv / "bin" / "python"), "ops.py", stack.site, *args],
        check=False,
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"ops.py {stack.site} {' '.join(args)}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def server(stack: Stack, env: dict[str, str], workdir: Path) -> Iterator[tuple[int, Any]]:
    import psutil

    port = free_port()
    log = open(workdir / f"{stack.name}-server.log", "w")  # noqa: SIM115
    bin_ = stack.venv / "bin"
    if stack.server == "gunicorn":
        cmd = [
            str(bin_ / "gunicorn"),
            "--no-control-socket",
            "-w",
            "2",
            "-k",
            "sync",
            "-b",
            f"127.0.0.1:{port}",
            "--timeout",
            "30",
            stack.module,
        ]
    else:
        cmd = [
            str(bin_ / "uvicorn"),
            "--workers",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--log-level",
            "warning",
            stack.module,
        ]
    proc = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
    children: list[int] = []
    try:
        wait_port(port)
        # every worker up (two sync workers answer one request at a time each)
        deadline = time.time() + 20
        while time.time() < deadline:
            kids = psutil.Process(proc.pid).children(recursive=True)
            workers = [k for k in kids if "resource_tracker" not in " ".join(k.cmdline())]
            if len(workers) >= 2:
                break
            time.sleep(0.1)
        children = [k.pid for k in psutil.Process(proc.pid).children(recursive=True)]
        yield port, proc
    finally:
        stop(proc, children)
        log.close()


# --- measurement ---------------------------------------------------------------------


def cpu_of(pids: list[int]) -> tuple[float, float]:
    """(user, system) CPU seconds of the processes so far."""
    import psutil

    user = system = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            t = psutil.Process(pid).cpu_times()
            user, system = user + t.user, system + t.system
    return user, system


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    parts = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle, sum(parts)


def run_wrk(
    port: int,
    workload: str,
    first: int,
    count: int,
    prefix: str,
    out: Path,
    a: argparse.Namespace,
    duration: float,
) -> tuple[dict[str, Any], str, float]:
    mode = "hot" if workload == "hot" else "many"
    threads, conns = (1, 1) if workload == "serial" else (a.threads, a.connections)
    env = clean_env(
        {
            "WRK_MODE": mode,
            "WRK_FIRST": str(first),
            "WRK_COUNT": str(count),
            "WRK_PREFIX": prefix,
            "WRK_OUT": str(out),
        }
    )
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{conns}",
        f"-d{int(duration)}s",
        f"--timeout={int(a.timeout)}s",
        "--latency",
        "-s",
        str(HERE / "pay.lua"),
        f"http://127.0.0.1:{port}",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = proc.stdout.read().decode() if proc.stdout else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"wrk failed: {text}")
    return json.loads(out.read_text()), text, usage.ru_utime + usage.ru_stime


def replay_sample(port: int, keys: list[tuple[int, str]], n: int) -> dict[str, Any]:
    """Send n of the keys that succeeded again: each must replay, not apply."""
    step = max(1, len(keys) // max(n, 1))
    sample = keys[::step][:n]
    got = {"sent": 0, "replayed_header": 0, "same_key_in_body": 0, "statuses": {}}
    for order_id, key in sample:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(
            "POST",
            f"/orders/{order_id}/pay",
            body=b'{"amount_cents": 1250}',
            headers={
                "Idempotency-Key": key,
                "X-Request-ID": key,
                "Content-Type": "application/json",
            },
        )
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        got["sent"] += 1
        got["statuses"][str(resp.status)] = got["statuses"].get(str(resp.status), 0) + 1
        if resp.getheader("Idempotent-Replayed") == "true":
            got["replayed_header"] += 1
        with contextlib.suppress(ValueError):
            if json.loads(data).get("key") == key:
                got["same_key_in_body"] += 1
    return got


def redis_stats(url: str) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for line in redis_cmd(url, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, rest = line.partition(":")
            fields = dict(kv.split("=") for kv in rest.split(","))
            stats[name[8:]] = {
                "calls": int(fields["calls"]),
                "usec_per_call": float(fields["usec_per_call"]),
            }
    return stats


# --- one stack -----------------------------------------------------------------------


# hot: every request PAYs one order; many: a random order of --orders;
# serial: as many, one connection (-t1 -c1): latency without contention
WORKLOADS = ("hot", "many", "serial")


def bench_stack(
    stack: Stack, a: argparse.Namespace, outdir: Path, rnd: int, profile: str | None = None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix=f"xsm-http-{stack.name}-") as tmp,
        contextlib.ExitStack() as ctx,
    ):
        workdir = Path(tmp)
        env_extra = dict(stack.env)
        store_pids: dict[str, list[int]] = {}
        settings_report: dict[str, Any] = {}
        db = ""
        if stack.store == "redis":
            url, rpid = ctx.enter_context(redis_server(workdir))
            env_extra["BENCH_REDIS_URL"] = url
            store_pids["redis-server"] = [rpid]
            settings_report["redis"] = {
                k: redis_cmd(url, "CONFIG", "GET", k).split()[1:]
                for k in ("appendonly", "appendfsync")
            } | {"version": redis_cmd(url, "INFO", "server").split("redis_version:")[1].split()[0]}
        else:
            db = ctx.enter_context(pg_database(f"xsm_bench_http_{stack.name.replace('-', '_')}"))
            env_extra["BENCH_PG_DB"] = db
            env = clean_env(env_extra | {"DJANGO_SETTINGS_MODULE": "site_fsm.settings"})
            subprocess.run(
                [str(stack.venv / "bin" / "python"), "-m", "django", "migrate", "-v0"],
                cwd=HERE,
                env=env,
                check=True,
            )
            settings_report["postgres"] = pg_settings(db, stack.env.get("BENCH_PG_SYNC_COMMIT"))
        env = clean_env(env_extra)
        port, proc = ctx.enter_context(server(stack, env, workdir))
        import psutil

        workers = [
            k.pid
            for k in psutil.Process(proc.pid).children(recursive=True)
            if "resource_tracker" not in " ".join(k.cmdline())
        ]  # uvicorn's
        n = a.orders
        for w, workload in enumerate(a.workloads):
            for attempt in range(a.noise_retries + 1):
                # orders of their own for each workload and attempt (and warm-up)
                base = 100_000 * (w + 1) + 10_000 * attempt
                first, count = (base, 1) if workload == "hot" else (base + 1, n)
                warm_first = base + n + 1 if workload == "hot" else base + n + 2
                warm_count = 1 if workload == "hot" else n
                ops(stack, env, "seed", str(first), str(count))
                ops(stack, env, "seed", str(warm_first), str(warm_count))
                tag = f"r{rnd}-{stack.name}-{workload}" + (f"-a{attempt}" if attempt else "")
                prefix = f"{tag}-{os.urandom(3).hex()}"
                # warm-up on orders of their own (not counted)
                run_wrk(
                    port,
                    workload,
                    warm_first,
                    warm_count,
                    prefix + "-w",
                    workdir / f"{tag}-warm.json",
                    a,
                    a.warmup,
                )
                if db:
                    mine, bg = pg_pids(db)
                    store_pids["postgres-backends"], store_pids["postgres-walwriter+bg"] = mine, bg
                url = env_extra.get("BENCH_REDIS_URL")
                if url:
                    redis_cmd(url, "CONFIG", "RESETSTAT")
                groups = {"server": [proc.pid, *workers], **store_pids}
                before = {g: cpu_of(p) for g, p in groups.items()}
                busy0, all0 = machine_busy()
                spies = []
                if profile == workload:
                    # worker 0: wall time (--idle: waits included); worker 1: on-CPU only
                    spies = [
                        start_py_spy(
                            workers[0], workdir / f"{tag}.wall.pyspy.txt", a.duration, True
                        ),
                        start_py_spy(
                            workers[1], workdir / f"{tag}.cpu.pyspy.txt", a.duration, False
                        ),
                    ]
                out = workdir / f"{tag}.json"
                result, text, wrk_cpu = run_wrk(
                    port, workload, first, count, prefix, out, a, a.duration
                )
                busy1, all1 = machine_busy()
                after = {g: cpu_of(p) for g, p in groups.items()}
                cpu = {g: sum(after[g]) - sum(before[g]) for g in groups}
                cpu_sys = {g: after[g][1] - before[g][1] for g in groups}
                for spy in spies:
                    spy.wait(60)
                rstats = redis_stats(url) if url else {}
                ok_lines = [
                    ln.split(" ", 1)
                    for ln in Path(str(out) + ".keys").read_text().split("\n")
                    if ln
                ]
                ok = [(int(i), k) for i, k in ok_lines]
                replay = replay_sample(port, ok, a.replays)
                check = ops(
                    stack, env, "verify", str(first), str(count), str(workdir / f"{tag}.log-keys")
                )
                log_keys = Path(workdir / f"{tag}.log-keys").read_text().split()
                ok_keys = {k for _, k in ok}
                log_set = set(log_keys)
                reqs = result["requests"]
                two = sum(v for s, v in result["statuses"].items() if s.startswith("2"))
                dur = result["duration_us"] / 1e6
                row = {
                    "round": rnd,
                    "stack": stack.name,
                    "label": stack.label,
                    "workload": workload,
                    "orders": count,
                    "threads": 1 if workload == "serial" else a.threads,
                    "connections": 1 if workload == "serial" else a.connections,
                    "duration_s": round(dur, 2),
                    "requests": reqs,
                    "rps": round(reqs / dur, 1),
                    "ok_2xx": two,
                    "ok_rps": round(two / dur, 1),
                    "non_2xx": reqs - two,
                    "statuses": result["statuses"],
                    "problems": result["problems"],
                    "socket_errors": result["errors"],
                    "latency_ms": {
                        p: round(v / 1000, 2)
                        for p, v in result["latency_us"]["percentiles"].items()
                    }
                    | {
                        "mean": round(result["latency_us"]["mean"] / 1000, 2),
                        "max": round(result["latency_us"]["max"] / 1000, 2),
                    },
                    "distinct_2xx_keys": len(ok_keys),
                    "applied": check["applied"],
                    "log_pay_records": check["log_pay_records"],
                    "log_keys_repeated": check["log_keys_repeated"],
                    "stored_responses": check["stored_responses"],
                    # committed, but wrk stopped before the answer arrived (at most
                    # one per connection): not a duplicate
                    "applied_without_2xx": len(log_set - ok_keys),
                    "2xx_without_log": len(ok_keys - log_set),
                    "duplicates": check["log_keys_repeated"]
                    + max(0, check["applied"] - len(log_set)),
                    "replay": replay,
                    "cpu_us_per_request": {
                        g: round(c / max(reqs, 1) * 1e6, 1) for g, c in cpu.items()
                    }
                    | {"wrk": round(wrk_cpu / max(reqs, 1) * 1e6, 1)},
                    "cpu_system_us_per_request": {
                        g: round(c / max(reqs, 1) * 1e6, 1) for g, c in cpu_sys.items()
                    },
                    "machine_busy_pct": round(100 * (busy1 - busy0) / max(all1 - all0, 1), 1),
                    # CPU seconds the machine spent on anything but these processes and
                    # wrk (other sessions' work, the kernel's own threads): noise
                    "other_cpu_s": round(
                        (busy1 - busy0) / os.sysconf("SC_CLK_TCK") - sum(cpu.values()) - wrk_cpu, 2
                    ),
                    "redis_commandstats": rstats,
                    "store_settings": settings_report,
                }
                row["attempt"] = attempt
                row["noisy"] = row["other_cpu_s"] > a.max_other
                rows.append(row)
                print(summary_line(row) + ("  NOISY" if row["noisy"] else ""), flush=True)
                # raw outputs
                (outdir / f"{tag}.wrk.txt").write_text(text)
                (outdir / f"{tag}.wrk.json").write_text(json.dumps(result, indent=1))
                for suffix, src in (
                    (".ok-keys.gz", Path(str(out) + ".keys")),
                    (".log-keys.gz", workdir / f"{tag}.log-keys"),
                ):
                    with open(src, "rb") as fi, gzip.open(outdir / f"{tag}{suffix}", "wb") as fo:
                        shutil.copyfileobj(fi, fo)
                for spied in workdir.glob(f"{tag}.*.pyspy.txt"):
                    shutil.copy(spied, outdir / spied.name)
                if not row["noisy"]:
                    break
        shutil.copy(
            workdir / f"{stack.name}-server.log", outdir / f"r{rnd}-{stack.name}-server.log"
        )
    return rows


def start_py_spy(pid: int, out: Path, duration: float, idle: bool) -> subprocess.Popen[Any]:
    return subprocess.Popen(
        [
            str(BENCH_VENV / "bin" / "py-spy"),
            "record",
            "-p",
            str(pid),
            "-d",
            str(int(duration)),
            "-r",
            "250",
            *(["--idle"] if idle else []),
            "-f",
            "raw",
            "-o",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def summary_line(r: dict[str, Any]) -> str:
    lat = r["latency_ms"]
    cpu = " ".join(f"{g}={v:.0f}" for g, v in r["cpu_us_per_request"].items())
    return (
        f"{r['stack']:<17} {r['workload']:<5} {r['rps']:>8.1f} req/s  p50 {lat['50']:>7.2f} ms"
        f"  p99 {lat['99']:>7.2f} ms  non-2xx {r['non_2xx']:>5} {r['problems'] or ''}"
        f"  dup {r['duplicates']}  applied {r['applied']}/{r['distinct_2xx_keys']}"
        f" (+{r['applied_without_2xx']} in flight at the stop, {r['2xx_without_log']} lost)"
        f"  cpu µs/req: {cpu}  busy {r['machine_busy_pct']}% (other {r['other_cpu_s']} s)"
    )


# --- tables --------------------------------------------------------------------------


def table(rows: list[dict[str, Any]]) -> str:
    """Medians over the rounds, one line per (stack, workload); one * per
    round that stayed noisy (other work above --max-other CPU seconds)."""
    # per (stack, workload, round): the quiet attempt, else the last (flagged *)
    per_round: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in rows:
        k = (r["stack"], r["workload"], r["round"])
        if k not in per_round or per_round[k].get("noisy", False):
            per_round[k] = r
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in per_round.values():
        by.setdefault((r["stack"], r["workload"]), []).append(r)
    out = [
        "| stack | workload | req/s | p50 ms | p99 ms | non-2xx | duplicates | applied / 2xx keys "
        "| server CPU µs/req | store CPU µs/req |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: |",
    ]
    for (stack, workload), rs in by.items():

        def med(f: Any, rs: list[dict[str, Any]] = rs) -> float:
            return float(statistics.median(f(r) for r in rs))

        non2 = "; ".join(
            f"{r['non_2xx']}"
            + (
                f" ({', '.join(f'{k}: {v}' for k, v in r['problems'].items())})"
                if r["problems"]
                else ""
            )
            for r in rs
        )

        def store(r: dict[str, Any]) -> float:
            return sum(v for g, v in r["cpu_us_per_request"].items() if g not in ("server", "wrk"))

        noisy = "*" * sum(1 for r in rs if r.get("noisy"))
        out.append(
            f"| {stack} | {workload} | {med(lambda r: r['rps']):,.0f}{noisy} | "
            f"{med(lambda r: r['latency_ms']['50']):.1f} | "
            f"{med(lambda r: r['latency_ms']['99']):.1f} | "
            f"{non2} | {sum(r['duplicates'] for r in rs)} | "
            f"{'; '.join(str(r['applied']) + '/' + str(r['distinct_2xx_keys']) for r in rs)} | "
            f"{med(lambda r: r['cpu_us_per_request']['server']):,.0f} | {med(store):,.0f} |"
        )
    return "\n".join(out)


def machine_info() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {}
    for venv, mods in (
        (
            BENCH_VENV,
            [
                "django",
                "django_xsm",
                "redis",
                "gunicorn",
                "uvicorn",
                "django_fsm",
                "django_fsm_log",
                "psycopg",
            ],
        ),
        (PEER_VENV, ["xstate_statemachine", "django", "redis", "gunicorn"]),
    ):
        code = (
            "import importlib.metadata as m, json; out = {}\n"
            f"for n in {mods!r}:\n"
            "    d = {'django_fsm': 'django-fsm-2', 'django_fsm_log': 'django-fsm-log',"
            " 'django_xsm': 'django-xsm', 'xstate_statemachine': 'xstate-statemachine'}.get(n, n)\n"
            "    out[n] = m.version(d)\n"
            "print(json.dumps(out))"
        )
        res = subprocess.run(
            [str(venv / "bin" / "python"), "-c", code], check=False, capture_output=True, text=True
        )
        versions[venv.name] = json.loads(res.stdout) if res.returncode == 0 else res.stderr[-300:]
    src = BENCH_VENV / "xsm-src-commit"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "versions": versions,
        "django_xsm_source_commit": src.read_text().strip() if src.exists() else "unknown",
        "wrk": subprocess.run(
            ["wrk", "-v"], check=False, capture_output=True, text=True
        ).stdout.split("\n")[0],
    }


# --- commands ------------------------------------------------------------------------


def cmd_bench(a: argparse.Namespace) -> None:
    chosen = stacks()
    names = [s.strip() for s in a.stacks.split(",") if s.strip()]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    outdir = Path(a.out) if a.out else RESULTS / stamp
    outdir.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    print(json.dumps(info), flush=True)
    rows: list[dict[str, Any]] = []
    for rnd in range(1, a.rounds + 1):
        order = names if rnd % 2 else list(reversed(names))  # alternate the order
        for name in order:
            rows += bench_stack(chosen[name], a, outdir, rnd)
            (outdir / "summary.json").write_text(
                json.dumps(
                    {"machine": info, "args": vars(a) | {"func": None}, "rows": rows}, indent=1
                )
            )
    md = table(rows)
    (outdir / "table.md").write_text(md + "\n")
    print(md)
    print(f"\nraw outputs: {outdir}")


def cmd_profile(a: argparse.Namespace) -> None:
    stack = stacks()[a.stack]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    outdir = Path(a.out) if a.out else RESULTS / f"profile-{stamp}"
    outdir.mkdir(parents=True, exist_ok=True)
    a.workloads = [a.workload]
    a.max_other, a.noise_retries = float("inf"), 0
    rows = bench_stack(stack, a, outdir, 0, profile=a.workload)
    (outdir / "summary.json").write_text(json.dumps({"rows": rows}, indent=1))
    for f in outdir.glob("*.pyspy.txt"):
        print(f)
        print(profile_report(f))


def profile_report(path: Path, top: int = 25) -> str:
    """Where a worker's time goes, from py-spy's raw (collapsed) output
    (``*.wall.*``: recorded with --idle, waits included; ``*.cpu.*``: on-CPU
    samples only): the share of samples whose stack contains each marker,
    first match wins, in this order."""
    buckets = [
        (
            "waiting for a connection (gunicorn accept/select)",
            ("(selectors.py)", "wait (gunicorn/workers"),
        ),
        ("gunicorn close_graceful: lingering until the client closes", ("close_graceful",)),
        ("Redis round trip: reading the answer", ("_read_from_socket", "read_response")),
        ("Redis round trip: sending the command", ("send_packed_command",)),
        ("PostgreSQL round trips (psycopg execute/commit)", ("psycopg/",)),
        ("redis-py: building/parsing commands", ("redis/",)),
        ("django-xsm: engine", ("django_xsm/engine",)),
        ("django-xsm: persistence/redis layer", ("django_xsm/persistence", "django_xsm/redis")),
        ("django-xsm: decorator/http/middleware/backend", ("django_xsm/",)),
        ("json", ("json/",)),
        ("Django request/response", ("django/",)),
        ("gunicorn: parse/write HTTP", ("gunicorn/",)),
    ]
    counts: dict[str, int] = {}
    frames: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        c = int(n)
        total += c
        for name, marks in buckets:
            if any(m in stack for m in marks):
                counts[name] = counts.get(name, 0) + c
                break
        else:
            counts["other"] = counts.get("other", 0) + c
        leaf = stack.split(";")[-1]
        frames[leaf] = frames.get(leaf, 0) + c
    lines = [f"{total} samples"]
    for name, c in sorted(counts.items(), key=lambda kv: -kv[1]):
        lines.append(f"{100 * c / total:5.1f}%  {name}")
    lines.append("top leaf frames:")
    for leaf, c in sorted(frames.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * c / total:5.1f}%  {leaf}")
    return "\n".join(lines)


def cmd_setup(a: argparse.Namespace) -> None:
    """The two virtualenvs (never the project's) and wrk."""
    py = a.python
    if shutil.which("wrk") is None:
        subprocess.run(["apt-get", "install", "-y", "wrk"], check=True)
    for venv in (BENCH_VENV, PEER_VENV):
        if not (venv / "bin" / "python").exists():
            subprocess.run([py, "-m", "venv", str(venv)], check=True)
    pip = lambda v, *p: subprocess.run([str(v / "bin" / "pip"), "install", "-q", *p], check=True)  # noqa: E731
    pip(
        BENCH_VENV,
        "Django==5.2.*",
        "redis==8.1.*",
        "gunicorn",
        "uvicorn[standard]",
        "django-fsm-2",
        "django-fsm-log",
        "psycopg[binary]",
        "psutil",
        "py-spy",
    )
    pip(
        PEER_VENV,
        "xstate-statemachine[redis]==0.11.0",
        "Django==5.2.*",
        "redis==8.1.*",
        "gunicorn",
        "psutil",
    )
    # django-xsm as committed (not the working tree): git archive REV
    rev = subprocess.run(
        ["git", "rev-parse", a.rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    src = Path(tempfile.mkdtemp(prefix="xsm-src-"))
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    pip(BENCH_VENV, "--force-reinstall", "--no-deps", str(src))
    subprocess.run(
        [str(BENCH_VENV / "bin" / "python"), "-m", "compileall", "-q", str(BENCH_VENV / "lib")],
        check=False,
    )
    (BENCH_VENV / "xsm-src-commit").write_text(rev + "\n")
    shutil.rmtree(src, ignore_errors=True)
    print(f"django-xsm {rev[:7]} in {BENCH_VENV}; peer in {PEER_VENV}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(required=True)
    s = sub.add_parser("setup")
    s.add_argument("--python", default=sys.executable)
    s.add_argument("--rev", default="HEAD", help="the django-xsm commit to install")
    s.set_defaults(func=cmd_setup)
    for name, fn in (("bench", cmd_bench), ("profile", cmd_profile)):
        p = sub.add_parser(name)
        p.add_argument("-t", "--threads", type=int, default=2)
        p.add_argument("-c", "--connections", type=int, default=8)
        p.add_argument("-d", "--duration", type=float, default=15)
        p.add_argument("--warmup", type=float, default=3)
        p.add_argument("--timeout", type=float, default=5)
        p.add_argument("--orders", type=int, default=1000, help="orders of the 'many' workload")
        p.add_argument("--replays", type=int, default=50, help="keys re-sent after each run")
        p.add_argument("--out", default="")
        p.set_defaults(func=fn)
        if name == "bench":
            p.add_argument("--stacks", default=DEFAULT_STACKS, help=f"of {', '.join(stacks())}")
            p.add_argument(
                "--workloads",
                default="hot,many,serial",
                type=lambda v: [w for w in v.split(",") if w in WORKLOADS],
            )
            p.add_argument("--rounds", type=int, default=1)
            p.add_argument(
                "--max-other",
                type=float,
                default=3.0,
                help="CPU seconds used by other work during a run above which it is "
                "noisy and measured again on fresh orders",
            )
            p.add_argument("--noise-retries", type=int, default=2)
        else:
            p.add_argument("--stack", default="xsm")
            p.add_argument("--workload", default="many", choices=WORKLOADS)
    a = ap.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
