"""AdaptiveLock: optimistic until a conflict, then the retry waits in the
token lock's queue; the retry helpers hand each attempt its strategy."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from django_xsm.exceptions import ConflictError, InvalidConfigError
from django_xsm.persistence import (
    AdaptiveLock,
    AuditPlugin,
    IdempotencyPlugin,
    OptimisticLock,
    PessimisticLock,
    aretry_on_conflict,
    persisted,
    retry_on_conflict,
)
from django_xsm.persistence import locks as locks_module
from django_xsm.persistence.records import OpenRequest
from tests.support import Backends, order_machine

M = order_machine()


def items(b: Backends) -> int:
    return int(b.store.load("o:1").snapshot["context"]["items"])


def seed(b: Backends) -> None:
    with persisted(b.store, "o:1", M) as order:
        order.send("ADD")


def test_the_strategy_of_each_attempt() -> None:
    lock = AdaptiveLock(2.5, ttl_ms=9_000)
    assert not lock.pessimistic and lock.new_token() == ""
    first = lock.for_attempt(0)
    assert type(first) is OptimisticLock and not first.pessimistic
    assert first.yields_to_holder  # a held lock ends the first try at open
    assert repr(first) == "OptimisticLock(yields_to_holder=True)"
    assert not OptimisticLock().yields_to_holder and not lock.yields_to_holder
    queued = lock.for_attempt(1)
    assert isinstance(queued, PessimisticLock)
    assert (queued.timeout, queued.ttl_ms) == (2.5, 9_000)
    assert lock.for_attempt(4) is queued
    assert repr(lock) == "AdaptiveLock(timeout=2.5, ttl_ms=9000)"
    fixed = PessimisticLock()
    assert fixed.for_attempt(0) is fixed and fixed.for_attempt(3) is fixed
    with pytest.raises(InvalidConfigError):
        AdaptiveLock(-1)


def test_a_block_with_the_adaptive_lock_on_its_own_takes_no_lock(b: Backends) -> None:
    seed(b)
    with persisted(b.store, "o:1", M, lock=AdaptiveLock()) as order:
        order.send("ADD")
        assert order.token == ""
        assert b.store.lock_holder("o:1") is None
    assert items(b) == 2


def _attempt(b: Backends, seen: list[tuple[Any, str, str | None]]) -> Any:
    def attempt(lock: Any) -> int:
        with persisted(b.store, "o:1", M, lock=lock) as order:
            order.send("ADD")
            kind = PessimisticLock if lock.pessimistic else OptimisticLock
            seen.append((kind, order.token, b.store.lock_holder("o:1")))
            if len(seen) == 1:  # another writer commits during the first attempt
                with persisted(b.store, "o:1", M) as other:
                    other.send("ADD")
        return int(order.committed.version)

    return attempt


def test_after_a_conflict_the_retry_takes_the_queueing_lock(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(b)
    slept: list[float] = []
    monkeypatch.setattr(locks_module.time, "sleep", slept.append)
    seen: list[tuple[Any, str, str | None]] = []
    assert retry_on_conflict(_attempt(b, seen), attempts=4, lock=AdaptiveLock()) == 3
    (first, token0, holder0), (retry, token1, holder1) = seen
    assert (first, token0, holder0) == (OptimisticLock, "", None)
    assert retry is PessimisticLock and token1 and holder1 == token1
    assert slept == [0.0]  # the queue is the wait: no backoff before it
    assert b.store.lock_holder("o:1") is None and items(b) == 3


async def test_async_after_a_conflict_the_retry_takes_the_queueing_lock(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(b)
    slept: list[float] = []

    async def fake_sleep(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    seen: list[tuple[Any, str, str | None]] = []
    sync_attempt = _attempt(b, seen)

    async def attempt(lock: Any) -> int:
        return sync_attempt(lock)

    assert await aretry_on_conflict(attempt, attempts=4, lock=AdaptiveLock()) == 3
    assert [(kind, bool(token), holder == token) for kind, token, holder in seen] == [
        (OptimisticLock, False, False),  # no token, and no holder (None != "")
        (PessimisticLock, True, True),
    ]
    assert slept == [0.0] and items(b) == 3


def test_an_open_without_a_lock_is_told_of_a_holder(b: Backends) -> None:
    seed(b)
    assert b.store.open(OpenRequest("o:1")).lock_held_ms == 0
    assert b.store.acquire_lock("o:1", "holder", 30_000) == 0
    held = b.store.open(OpenRequest("o:1")).lock_held_ms
    assert 0 < held <= 30_000
    # the holder's own (locked) open is not "held by another"
    mine = b.store.open(OpenRequest("o:1", lock_token="holder", lock_ttl_ms=30_000))
    assert mine.locked and mine.lock_held_ms == 0


def test_the_first_try_gives_up_at_open_when_the_lock_is_held(b: Backends) -> None:
    seed(b)
    inbox, ran = b.inbox, []
    plugins = [IdempotencyPlugin(inbox)]
    assert b.store.acquire_lock("o:1", "holder", 30_000) == 0
    first = AdaptiveLock().for_attempt(0)
    with pytest.raises(ConflictError) as caught:
        with persisted(
            b.store, "o:1", M, lock=first, plugins=plugins, idempotency_key="k1"
        ) as order:
            ran.append(order)  # the body never runs: its commit would lose
    assert ran == []
    err = caught.value
    assert (err.reason, err.held_lock, err.expected, err.actual) == ("lock", False, 1, 1)
    assert err.retry_after_s >= 1
    # the key claimed at open was released: the next attempt claims it afresh
    b.store.release_lock("o:1", "holder")
    with persisted(b.store, "o:1", M, lock=first, plugins=plugins, idempotency_key="k1") as order:
        order.send("ADD")
    assert items(b) == 2
    # a finished key replays even while the lock is held (a replay needs no lock)
    assert b.store.acquire_lock("o:1", "holder", 30_000) == 0
    with persisted(b.store, "o:1", M, lock=first, plugins=plugins, idempotency_key="k1") as order:
        assert order.duplicate
    # a plain optimistic block still runs and loses only at commit
    with pytest.raises(ConflictError):
        with persisted(b.store, "o:1", M) as order:
            order.send("ADD")
            ran.append(order)
    assert len(ran) == 1


def test_a_held_lock_sends_the_adaptive_retry_to_the_queue_without_running_the_body(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(b)
    monkeypatch.setattr(locks_module.time, "sleep", lambda s: None)
    assert b.store.acquire_lock("o:1", "holder", 30_000) == 0
    timer = threading.Timer(0.2, b.store.release_lock, ("o:1", "holder"))
    timer.start()
    bodies: list[bool] = []

    def attempt(lock: Any) -> int:
        with persisted(b.store, "o:1", M, lock=lock) as order:
            bodies.append(lock.pessimistic)
            order.send("ADD")
        return int(order.committed.version)

    try:
        assert retry_on_conflict(attempt, attempts=3, lock=AdaptiveLock(timeout=5)) == 2
    finally:
        timer.cancel()
    assert bodies == [True]  # the first try stopped at open; the queued one ran once
    assert items(b) == 2


def test_an_optimistic_retry_still_backs_off(b: Backends, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(b)
    slept: list[float] = []
    monkeypatch.setattr(locks_module.time, "sleep", slept.append)
    seen: list[tuple[Any, str, str | None]] = []
    retry_on_conflict(_attempt(b, seen), attempts=4, lock=OptimisticLock(), base_s=0.01)
    assert [kind for kind, _, _ in seen] == [OptimisticLock, OptimisticLock]
    assert len(slept) == 1 and 0 <= slept[0] <= 0.01


def test_hot_key_threads_all_get_through_in_two_attempts_at_most(b: Backends) -> None:
    seed(b)
    threads, per_thread = 6, 8
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def one(lock: Any) -> None:
        with persisted(b.store, "o:1", M, lock=lock, plugins=[AuditPlugin(b.log)]) as order:
            order.send("ADD")

    def worker() -> None:
        try:
            start.wait()
            for _ in range(per_thread):
                # one optimistic try, one queued: a queued attempt never conflicts
                retry_on_conflict(one, attempts=2, lock=AdaptiveLock(timeout=10))
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    assert errors == []
    assert items(b) == 1 + threads * per_thread
    assert [r.version for r in b.log.read("o:1")] == list(range(2, 2 + threads * per_thread))
    assert b.store.lock_holder("o:1") is None


def test_giving_up_after_queued_attempts_says_how_many() -> None:
    calls: list[Any] = []

    def never(lock: Any) -> None:
        calls.append(PessimisticLock if lock.pessimistic else OptimisticLock)
        raise ConflictError("o:1", expected=1, actual=2)

    with pytest.raises(ConflictError) as err:
        retry_on_conflict(never, attempts=3, lock=AdaptiveLock())
    assert err.value.attempts == 3
    assert calls == [OptimisticLock, PessimisticLock, PessimisticLock]
