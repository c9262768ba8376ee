"""The outbox under faults, on own redis-server processes: committed entries
survive a SIGKILL of the server (appendonly, appendfsync always), and an
entry whose worker was SIGKILLed in the middle of its handler is taken by
another consumer after the visibility timeout and acknowledged once.

Every test starts its own server on a free loopback port, stops it by pid
and carries a timeout; the killed worker is a real process
(``tests/redis/outbox_worker.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from django_xsm.redis import OutboxLease, RedisOutbox
from tests.redis.outbox_worker import BUCKETS, commit
from tests.redis.servers import RedisServer, needs_redis_server, wait_until
from tests.support import redis_backends, unique_prefix

pytestmark = [needs_redis_server, pytest.mark.fault]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer(appendonly=True).start()
    try:
        yield s
    finally:
        s.cleanup()


def everything(ob: RedisOutbox) -> dict[str, set[str]]:
    """Delivery ids by where they are."""
    return {
        "stream": {e.delivery_id for e, _, _ in ob.pending(limit=10_000)},
        "waiting": {e.delivery_id for e, _ in ob.waiting(limit=10_000)},
        "dead": {d.entry.delivery_id for d in ob.dead_letters(limit=10_000)},
    }


@pytest.mark.timeout(60)
def test_committed_entries_survive_a_kill_and_restart_of_the_server(server: RedisServer) -> None:
    prefix = unique_prefix()
    b = redis_backends(server.client(), prefix, buckets=BUCKETS)
    for n in range(20):
        commit(b.store, f"order:{n}", "PAY")  # 3 entries each, acknowledged commits
    ob = RedisOutbox(server.client(), prefix=prefix, buckets=BUCKETS)
    leases = ob.take("w1", count=10, visibility_timeout_ms=200)
    for lease in leases[:3]:
        assert ob.fail(lease, "HTTP 503", retry_at_ms=0) == "retry"
    for lease in leases[3:5]:
        assert ob.fail(lease, "HTTP 410", retry_at_ms=None) == "dead"
    before = everything(ob)
    assert sum(len(ids) for ids in before.values()) == 60
    assert (len(before["waiting"]), len(before["dead"])) == (3, 2)

    server.kill9()  # no shutdown, no final fsync
    server.start()

    after = RedisOutbox(server.client(), prefix=prefix, buckets=BUCKETS)
    assert everything(after) == before
    assert after.stats()["pending"] + after.stats()["retrying"] == 58
    # the leases held at the crash come back after their visibility timeout
    time.sleep(0.25)
    delivered: list[OutboxLease] = []
    while leases := after.take("w2", count=7, visibility_timeout_ms=200):
        for lease in leases:
            assert after.ack(lease)
        delivered += leases
    ids = [lease.entry.delivery_id for lease in delivered]
    assert sorted(ids) == sorted(before["stream"] | before["waiting"])
    assert sum(1 for lease in delivered if lease.deliveries == 2) == 5  # held by w1
    assert {d.entry.delivery_id for d in after.dead_letters()} == before["dead"]


@pytest.mark.timeout(60)
def test_a_worker_killed_in_its_handler_is_replaced_after_the_visibility_timeout(
    server: RedisServer,
) -> None:
    prefix = unique_prefix()
    b = redis_backends(server.client(), prefix, buckets=BUCKETS)
    commit(b.store, "order:1", "PAY")  # order.created, order.paid, order.notified
    visibility_ms = 300
    role = ["take_then_hang", server.url, prefix, str(visibility_ms)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.redis.outbox_worker", *role],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        doomed = proc.stdout.readline().strip()
        assert doomed and doomed != "-", proc.stderr.read() if proc.stderr else ""
        taken_at = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)  # in the middle of its handler
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    ob = RedisOutbox(server.client(), prefix=prefix, buckets=BUCKETS)
    others = ob.take("w2", visibility_timeout_ms=visibility_ms)
    assert len(others) == 2 and doomed not in {o.entry.delivery_id for o in others}
    assert all(ob.ack(o) for o in others)
    (again,) = wait_until(
        lambda: ob.take("w2", visibility_timeout_ms=visibility_ms), timeout=10, what="reclaim"
    )
    assert time.monotonic() - taken_at >= visibility_ms / 1000 - 0.05
    assert again.entry.delivery_id == doomed
    assert (again.entry.event_type, again.deliveries, again.entry.attempts) == (
        "order.created",
        2,
        1,
    )
    acks = [ob.ack(again), ob.ack(again)]
    assert acks == [True, False]  # exactly once
    assert ob.take("w3") == []
    assert ob.stats() == {"pending": 0, "retrying": 0, "dead": 0, "lag_ms": 0}
