"""Fault injection on own redis-server processes (docs/guarantees.md).

Every test starts its own server on a free loopback port, stops it by pid
and carries a timeout. Workers that die or pause are real processes
(``tests/redis/workers.py``) signalled at a known milestone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_xsm.exceptions import ConflictError, IdempotencyInFlightError, StoreUnavailableError
from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, PessimisticLock, persisted
from django_xsm.persistence.records import ClaimRequest, ClaimStatus, InboxMark
from django_xsm.redis import RedisInbox, RedisLog, RedisStore
from tests.redis.helpers import entry, namespace_state, snap, unit
from tests.redis.servers import RedisServer, needs_redis_server, wait_until
from tests.support import Backends, order_machine, redis_backends, unique_prefix

pytestmark = [needs_redis_server, pytest.mark.fault]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer().start()
    try:
        yield s
    finally:
        s.cleanup()


def fast_client(port: int, *, timeout: float = 0.5, retries: int = 0) -> redis.Redis:
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), retries),
        # redis-py before 6 retries a timeout only when told to; 6+ always does
        retry_on_error=[redis.exceptions.TimeoutError] if retries else None,
    )


class Worker:
    """A worker process of tests/redis/workers.py, stopped by pid."""

    def __init__(self, role: str, url: str, prefix: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.redis.workers", role, url, prefix],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def expect(self, line: str) -> None:
        assert self.proc.stdout is not None
        got = self.proc.stdout.readline().strip()
        if got != line:
            self.proc.kill()
            raise AssertionError(f"worker said {got!r}, not {line!r}: {self.proc.stderr.read()}")  # type: ignore[union-attr]

    def tell(self) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


# --- a paused server -------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_paused_server_fails_within_the_socket_timeout_and_nothing_is_half_written(
    server: RedisServer,
) -> None:
    prefix = unique_prefix()
    b = redis_backends(fast_client(server.port), prefix)
    b.store.save("order:1", snap(), expected_version=0)
    c = ClaimRequest("acct", "order:1", "k", "fp", "w", 60_000)
    b.inbox.claim(c)
    u = unit(
        "order:1",
        1,
        snap(items=5),
        marks=(InboxMark(c, {"ok": 1}, 60_000),),
        log_entries=(entry(), entry("PAY")),
    )
    server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as err:
            b.store.commit(u, inbox=b.inbox, log=b.log)
        assert time.monotonic() - started < 0.5 + 0.4
        assert err.value.cause == "TimeoutError"
    finally:
        server.resume()
    # The request may have reached the server and run after SIGCONT: all of
    # it or nothing, never a part.
    rec = b.store.load("order:1")
    records = b.log.read("order:1")
    row = b.inbox.get("acct", "order:1", "k")
    applied = (rec.version, len(records), row["state"]) == (2, 2, "done")
    untouched = (rec.version, len(records), row["state"]) == (1, 0, "in_flight")
    assert applied or untouched, (rec.version, records, row)
    # The client's retry of that commit is success, applied exactly once.
    again = b.store.commit(u, inbox=b.inbox, log=b.log)
    assert again.version == 2 and again.replayed is applied
    assert [r.seq for r in b.log.read("order:1")] == [1, 2]
    assert b.store.load("order:1").snapshot["context"]["items"] == 5


@pytest.mark.timeout(30)
def test_redis_py_retries_after_a_timeout_are_recognised_by_commit_id(
    server: RedisServer,
) -> None:
    """A client that retries on timeout (redis-py's default for clients
    built with ``redis.Redis(...)``) re-sends a commit that already ran."""
    prefix = unique_prefix()
    b = redis_backends(fast_client(server.port, timeout=0.3, retries=20), prefix)
    b.store.save("order:1", snap(), expected_version=0)
    u = unit("order:1", 1, snap(items=3), log_entries=(entry(),))
    outcome: list[Any] = []
    server.pause()
    try:
        worker = threading.Thread(
            target=lambda: outcome.append(b.store.commit(u, inbox=b.inbox, log=b.log))
        )
        worker.start()
        time.sleep(0.5)  # pacing only: the outcome is asserted for any order
    finally:
        server.resume()
    worker.join(timeout=20)
    assert len(outcome) == 1, "the commit did not finish"
    assert outcome[0].version == 2
    assert len(b.log.read("order:1")) == 1
    assert b.store.load("order:1").snapshot["context"]["items"] == 3


# --- durability --------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_appendonly_restart_keeps_every_acknowledged_commit() -> None:
    server = RedisServer(appendonly=True).start()
    try:
        prefix = unique_prefix()
        b = redis_backends(server.client(), prefix)
        acked: dict[str, int] = {}
        for i in range(40):
            key = f"order:{i % 7}"
            c = ClaimRequest("acct", key, f"evt{i}", "fp", "w", 60_000)
            b.inbox.claim(c)
            result = b.store.commit(
                unit(
                    key,
                    acked.get(key, 0),
                    snap(items=i),
                    marks=(InboxMark(c, {"i": i}, 3_600_000),),
                    log_entries=(entry(f"E{i}"),),
                    next_due_ms=1_000 + i,
                ),
                inbox=b.inbox,
                log=b.log,
            )
            acked[key] = result.version
        before = namespace_state(b.client, prefix)
        server.kill9()
        server.start()
        b = redis_backends(server.client(), prefix)
        assert namespace_state(b.client, prefix) == before
        for key, version in acked.items():
            assert b.store.load(key).version == version
            assert [r.version for r in b.log.read(key)] == list(range(1, version + 1))
        assert b.inbox.claim(ClaimRequest("acct", "order:0", "evt0", "fp", "x", 1)).receipt == {
            "i": 0
        }
        assert len(b.store.due_keys(10, limit=100)) == 7
    finally:
        server.cleanup()


# --- a worker that dies between claim and commit -------------------------------------


@pytest.mark.timeout(60)
def test_a_killed_worker_blocks_its_idempotency_key_only_until_the_lease_ends(
    server: RedisServer,
) -> None:
    prefix = unique_prefix()
    worker = Worker("claim_then_wait", server.url, prefix)
    try:
        worker.expect("claimed")
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(timeout=10)
    finally:
        worker.stop()
    client = server.client()
    store = RedisStore(client, prefix=prefix, lock_ttl_ms=600)
    inbox, log = RedisInbox(client, prefix=prefix), RedisLog(client, prefix=prefix)
    plugins = [IdempotencyPlugin(inbox, principal=lambda e: "acct"), AuditPlugin(log)]
    m = order_machine()

    def deliver() -> Any:
        with persisted(store, "order:1", m, plugins=plugins) as inst:
            return inst.send("ADD", idempotency_key="evt-1", actor="retry")

    # right after the crash: blocked, with a bounded retry hint
    with pytest.raises(IdempotencyInFlightError) as err:
        deliver()
    assert err.value.retry_after_s == 1  # the 600 ms lease, rounded up
    row = inbox.get("acct", "order:1", "evt-1")
    assert row["state"] == "in_flight"
    assert 0 < row["expires_ms"] - int(client.time()[0]) * 1000 <= 1_600

    def delivered() -> Any:
        try:
            return deliver()
        except IdempotencyInFlightError:
            return None

    first = wait_until(delivered, timeout=5, what="the lease to end")
    assert first.accepted and not getattr(first, "duplicate", False)
    duplicate = deliver()
    assert duplicate.duplicate is True
    rec = store.load("order:1")
    assert rec.snapshot["context"]["items"] == 1 and rec.version == 1
    assert [(r.event_type, r.actor) for r in log.read("order:1")] == [("ADD", "retry")]
    assert inbox.claim(ClaimRequest("acct", "order:1", "evt-1", "x", "y", 1)).status in (
        ClaimStatus.MISMATCH,
    )


# --- SCRIPT FLUSH while commits run ----------------------------------------------------


@pytest.mark.timeout(60)
def test_script_flush_in_the_middle_of_a_run_fails_nothing(server: RedisServer) -> None:
    prefix = unique_prefix()
    b = redis_backends(server.client(), prefix)
    m = order_machine()
    plugins = [IdempotencyPlugin(b.inbox, principal=lambda e: "acct"), AuditPlugin(b.log)]
    stop = threading.Event()
    flushes = 0
    errors: list[BaseException] = []

    def flusher() -> None:
        nonlocal flushes
        flusher_client = server.client()
        while not stop.is_set():
            flusher_client.script_flush()
            flushes += 1
            time.sleep(0.0005)

    def writer(n: int) -> None:
        try:
            for i in range(60):
                with persisted(b.store, f"order:{n}", m, plugins=plugins) as inst:
                    inst.send("ADD", idempotency_key=f"e{i}")
                    inst.send("ADD", idempotency_key=f"e{i}")  # duplicate
                b.store.due_keys(time.time())
                b.store.list_page(machine="order", limit=5)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=flusher)] + [
        threading.Thread(target=writer, args=(n,)) for n in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join(timeout=50)
    stop.set()
    threads[0].join(timeout=5)
    assert errors == []
    assert flushes > 10
    for n in range(3):
        assert b.store.load(f"order:{n}").snapshot["context"]["items"] == 60
        assert len(b.log.read(f"order:{n}")) == 60


# --- a lock holder paused past its lease ----------------------------------------------


@pytest.mark.timeout(60)
def test_a_lock_holder_paused_past_its_lease_loses_to_the_next_holder(
    server: RedisServer,
) -> None:
    prefix = unique_prefix()
    b: Backends = redis_backends(server.client(), prefix)
    b.store.save("order:1", order_machine().start().snapshot(), expected_version=0)
    slow = Worker("lock_then_wait", server.url, prefix)
    try:
        slow.expect("locked")
        os.kill(slow.proc.pid, signal.SIGSTOP)  # paused while holding the lock
        wait_until(
            lambda: b.store.lock_holder("order:1") is None, timeout=5, what="the lease to end"
        )
        with persisted(
            b.store, "order:1", order_machine(), lock=PessimisticLock(ttl_ms=10_000)
        ) as inst:
            inst.send("ADD", n=5)
            # the paused holder wakes up and commits while we hold the lock:
            # same version, stale token
            os.kill(slow.proc.pid, signal.SIGCONT)
            assert slow.tell() == "ConflictError reason=lock"
        rec = b.store.load("order:1")
        assert rec.version == 2 and rec.snapshot["context"]["items"] == 5
        # and once our commit moved the version on, a stale holder fails anyway
        with pytest.raises(ConflictError):
            b.store.commit(unit("order:1", 1, snap(items=666), lock_token="stale"))
        assert b.store.load("order:1").snapshot["context"]["items"] == 5
    finally:
        slow.stop()
