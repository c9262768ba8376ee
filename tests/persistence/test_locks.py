"""Locks: the optimistic compare-and-set, the retry helpers, and the
pessimistic token lock that fails fast and is fenced by token and version."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from django_xsm.exceptions import ConflictError, LockTimeoutError
from django_xsm.persistence import (
    AuditPlugin,
    OptimisticLock,
    PessimisticLock,
    aretry_on_conflict,
    persisted,
    retry_on_conflict,
)
from django_xsm.persistence import locks as locks_module
from tests.support import Backends, order_machine

M = order_machine()


def items(b: Backends, key: str = "o:1") -> int:
    return int(b.store.load(key).snapshot["context"]["items"])


def seed(b: Backends, key: str = "o:1") -> None:
    with persisted(b.store, key, M) as order:
        order.send("ADD")


def test_an_optimistic_conflict_raises_conflict_error_and_writes_nothing(b: Backends) -> None:
    seed(b)
    with pytest.raises(ConflictError) as err:
        with persisted(b.store, "o:1", M, lock=OptimisticLock()) as slow:
            slow.send("ADD", n=100)
            with persisted(b.store, "o:1", M) as fast:
                fast.send("ADD")
    assert (err.value.expected, err.value.actual) == (1, 2)
    assert b.store.load("o:1").version == 2 and items(b) == 2


def test_creating_concurrently_is_a_conflict_for_the_second_creator(b: Backends) -> None:
    with pytest.raises(ConflictError):
        with persisted(b.store, "o:1", M) as first:
            first.send("ADD", n=5)
            with persisted(b.store, "o:1", M) as second:
                second.send("ADD")
    assert b.store.load("o:1").version == 1 and items(b) == 1


def test_retry_on_conflict_reruns_with_backoff_until_it_wins(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(b)
    slept: list[float] = []
    monkeypatch.setattr(locks_module.time, "sleep", slept.append)
    runs: list[int] = []

    def attempt() -> int:
        with persisted(b.store, "o:1", M) as order:
            order.send("ADD")
            runs.append(order.version)
            if len(runs) <= 2:  # another writer sneaks in twice
                with persisted(b.store, "o:1", M) as other:
                    other.send("ADD")
        return int(order.committed.version)

    assert retry_on_conflict(attempt, attempts=5, base_s=0.01, max_s=0.5) == 4
    assert runs == [1, 2, 3]  # each attempt reloaded the newer version
    assert items(b) == 4
    assert len(slept) == 2 and all(0 <= d <= 0.01 * 2**i for i, d in enumerate(slept))


def test_retry_on_conflict_gives_up_after_n_attempts(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(b)
    slept: list[float] = []
    monkeypatch.setattr(locks_module.time, "sleep", slept.append)
    calls: list[int] = []

    def always_loses() -> None:
        calls.append(1)
        with persisted(b.store, "o:1", M) as order:
            order.send("ADD")
            with persisted(b.store, "o:1", M) as other:
                other.send("ADD", n=10)

    with pytest.raises(ConflictError):
        retry_on_conflict(always_loses, attempts=3, base_s=1.0, max_s=1.5)
    assert len(calls) == 3 and len(slept) == 2 and max(slept) <= 1.5
    assert items(b) == 31  # only the interlopers' commits landed


async def test_aretry_on_conflict_reruns_and_gives_up(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(b)
    slept: list[float] = []

    async def fake_sleep(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        with persisted(b.store, "o:1", M) as order:
            order.send("ADD")
            if len(calls) == 1:
                with persisted(b.store, "o:1", M) as other:
                    other.send("ADD")
        return "done"

    assert await aretry_on_conflict(attempt, attempts=4) == "done"
    assert len(calls) == 2 and len(slept) == 1 and items(b) == 3

    async def never() -> None:
        calls.append(1)
        raise ConflictError("o:1", expected=1, actual=2)

    calls.clear()
    with pytest.raises(ConflictError):
        await aretry_on_conflict(never, attempts=2)
    assert len(calls) == 2
    assert asyncio.iscoroutinefunction(aretry_on_conflict)


def test_pessimistic_contention_fails_fast_with_lock_timeout(b: Backends) -> None:
    seed(b)
    with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=5)) as holder:
        holder.send("ADD")
        # The lease is 30 s: failing within the test timeout proves the wait
        # was bounded by the caller's timeout, not by the holder's lease.
        with pytest.raises(LockTimeoutError) as err:
            with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0.05)):
                pytest.fail("the body must not run")
        assert err.value.timeout == 0.05 and err.value.retry_after_s >= 1
        assert b.store.lock_holder("o:1") == holder.token
    assert b.store.lock_holder("o:1") is None and items(b) == 2


def test_an_optimistic_writer_loses_to_a_pessimistic_holder(b: Backends) -> None:
    seed(b)
    with persisted(b.store, "o:1", M, lock=PessimisticLock()) as holder:
        with pytest.raises(ConflictError) as err:
            with persisted(b.store, "o:1", M) as sneaky:
                sneaky.send("ADD")
        assert err.value.reason == "lock"
        holder.send("PAY")
    assert b.store.load("o:1").snapshot["value"] == "paid" and items(b) == 1


def _expire(b: Backends, holder_ttl_ms: int) -> None:
    b.pass_time(holder_ttl_ms + 5)


def test_a_holder_paused_past_its_lease_loses_to_the_next_holder_same_version(
    bl: Backends,
) -> None:
    """Fenced by the token: the next holder has not committed yet, so the
    version alone would let the paused holder overwrite it."""
    b = bl
    seed(b)
    paused_block = persisted(b.store, "o:1", M, lock=PessimisticLock(ttl_ms=50))
    paused = paused_block.__enter__()
    paused.send("ADD", n=100)
    _expire(b, 50)
    with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)) as nxt:
        with pytest.raises(ConflictError) as err:
            paused_block.__exit__(None, None, None)  # wakes up, tries to commit
        assert err.value.reason == "lock"
        assert b.store.lock_holder("o:1") == nxt.token  # its lock was not freed
        nxt.send("ADD")
    assert b.store.load("o:1").version == 2 and items(b) == 2


def test_a_holder_paused_past_its_lease_loses_after_the_next_holder_committed(
    bl: Backends,
) -> None:
    b = bl
    seed(b)
    with pytest.raises(ConflictError):
        with persisted(b.store, "o:1", M, lock=PessimisticLock(ttl_ms=50)) as paused:
            paused.send("ADD", n=100)
            _expire(b, 50)
            with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)) as nxt:
                nxt.send("PAY")
    record = b.store.load("o:1")
    assert record.version == 2 and record.snapshot["value"] == "paid" and items(b) == 1
    assert b.store.lock_holder("o:1") is None


def _hammer(b: Backends, lock: Any, threads: int, per_thread: int) -> list[BaseException]:
    seed(b)
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def one() -> None:
        with persisted(b.store, "o:1", M, lock=lock, plugins=[AuditPlugin(b.log)]) as order:
            order.send("ADD")

    def worker() -> None:
        try:
            start.wait()
            for _ in range(per_thread):
                retry_on_conflict(
                    one, attempts=200, base_s=0.001, max_s=0.02,
                    retry_on=(ConflictError, LockTimeoutError),
                )  # fmt: skip
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    return errors


@pytest.mark.parametrize(
    "lock", [OptimisticLock(), PessimisticLock(timeout=2)], ids=["optimistic", "pessimistic"]
)
def test_thread_races_lose_no_update_and_log_in_commit_order(b: Backends, lock: Any) -> None:
    threads, per_thread = 4, 15
    assert _hammer(b, lock, threads, per_thread) == []
    assert items(b) == 1 + threads * per_thread
    assert b.store.load("o:1").version == 1 + threads * per_thread
    assert b.store.lock_holder("o:1") is None
    # The log order is the commit order: seq n was written by version n + 1.
    records = b.log.read("o:1")
    assert [(r.seq, r.version) for r in records] == [
        (n, n + 1) for n in range(1, threads * per_thread + 1)
    ]


def test_store_lock_is_the_token_lock_on_its_own(b: Backends) -> None:
    seed(b)
    with b.store.lock("o:1", timeout=0) as token:
        assert b.store.lock_holder("o:1") == token
        with pytest.raises(LockTimeoutError):
            with b.store.lock("o:1", timeout=0.02):
                pytest.fail("two holders")
        with pytest.raises(LockTimeoutError):
            with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)):
                pass
        with pytest.raises(ConflictError) as err:
            with persisted(b.store, "o:1", M) as order:
                order.send("ADD")
        assert err.value.reason == "lock"
    assert b.store.lock_holder("o:1") is None and items(b) == 1
    with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)) as order:
        order.send("ADD")
    assert items(b) == 2
