"""The queueing lock: a pessimistic waiter blocks until the holder's release
wakes it (BLPOP on the key's wake list), instead
of polling; Redis wakes one waiter per release, longest waiting first."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from django_xsm.exceptions import InvalidConfigError, LockTimeoutError
from django_xsm.persistence import PessimisticLock, apersisted, persisted
from django_xsm.redis import AsyncRedisStore
from django_xsm.redis.keys import LOCK_WAKE_MS
from tests.support import LIVE_URL, Backends, delete_namespace, order_machine, unique_prefix

M = order_machine()


def _spy_op(store: Any, name: str) -> list[Any]:
    """Record what the operation ``store.<name>`` returns (the block looks
    it up on the instance)."""
    seen: list[Any] = []
    operation = getattr(store, name)

    def spied(*args: Any, **kwargs: Any) -> Any:
        result = yield from operation(*args, **kwargs)
        seen.append(result)
        return result

    setattr(store, name, spied)
    return seen


def _long_slices(b: Backends) -> None:
    """Let one BLPOP last up to 3 s, so that only a release (not the
    250 ms slice) can end a wait in these tests."""
    core = getattr(b.store, "core", None)
    if core is not None:
        core.wait_slice_s = 3.0


def _in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(target())
        except BaseException as exc:  # reported by the test
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_release_wakes_a_flagged_waiter(b: Backends) -> None:
    _long_slices(b)
    assert b.store.acquire_lock("o:1", "holder", 30_000) == 0
    flagged = threading.Event()

    def waiter() -> bool:
        assert b.store.acquire_lock("o:1", "waiter", 30_000) > 0  # busy: flags itself
        flagged.set()
        return bool(b.store.wait_unlocked("o:1", 2.5))

    thread, out = _in_thread(waiter)
    assert flagged.wait(10)
    assert b.store.release_lock("o:1", "holder")
    thread.join(10)
    # True: woken by the release (a wait that ran out would say False). A
    # release before the waiter blocked is not lost: the wake-up waits for it.
    assert out == [True]
    assert b.store.acquire_lock("o:1", "waiter", 30_000) == 0


def test_a_wait_on_a_free_or_never_released_lock(b: Backends) -> None:
    # nothing to wake it: the wait runs out (False) and costs no error
    b.store.acquire_lock("o:1", "holder", 30_000)
    assert b.store.wait_unlocked("o:1", 0.05) is False
    assert b.store.wait_unlocked("o:1", 0) is False  # no time: no wait (BLPOP 0 is forever)
    assert b.store.wait_unlocked("o:1", float("nan")) is False
    with pytest.raises(InvalidConfigError, match="seconds must be a number"):
        b.store.wait_unlocked("o:1", "1")
    with pytest.raises(InvalidConfigError):
        b.store.wait_unlocked("", 1.0)


def test_a_pessimistic_waiter_is_woken_by_the_commit_that_releases(b: Backends) -> None:
    _long_slices(b)
    with persisted(b.store, "o:1", M) as order:
        order.send("ADD")
    opens = _spy_op(b.store, "open_op")
    woken = _spy_op(b.store, "wait_unlocked_op")
    holding, waiting = threading.Event(), threading.Event()

    def waiter() -> int:
        assert holding.wait(10)
        with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=2.8)) as order:
            order.send("ADD")
        return int(order.snapshot()["context"]["items"])

    thread, out = _in_thread(waiter)
    with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=5)) as holder:
        holding.set()
        # the waiter found the lock busy (its first open) and waits
        while not opens[1:] and thread.is_alive():
            waiting.wait(0.005)
        holder.send("ADD")
    thread.join(10)
    assert out == [3]
    # the holder's open, the waiter's busy open, one wait ended by the
    # holder's commit (not a poll loop, not a wait that ran out), its open
    assert [r.lock_busy_ms > 0 for r in opens] == [False, True, False]
    assert woken == [True]


def test_waiters_on_a_hot_key_take_turns_and_every_update_lands(b: Backends) -> None:
    workers, rounds = 6, 5
    with persisted(b.store, "hot", M) as order:
        order.send("ADD")
    timeouts: list[BaseException] = []

    def worker() -> None:
        for _ in range(rounds):
            try:
                with persisted(b.store, "hot", M, lock=PessimisticLock(timeout=20)) as order:
                    order.send("ADD")
            except LockTimeoutError as exc:  # pragma: no cover - reported below
                timeouts.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert timeouts == []
    record = b.store.load("hot")
    assert record.snapshot["context"]["items"] == 1 + workers * rounds


def test_store_lock_waits_for_the_release(b: Backends) -> None:
    _long_slices(b)
    woken = _spy_op(b.store, "wait_unlocked_op")
    tries = _spy_op(b.store, "acquire_lock_op")
    held = threading.Event()

    def second() -> str:
        assert held.wait(10)
        with b.store.lock("o:1", timeout=2.8) as token:
            return str(token)

    thread, out = _in_thread(second)
    with b.store.lock("o:1", timeout=1) as first:
        held.set()
        while not any(tries[1:]) and thread.is_alive():  # the second found it busy
            threading.Event().wait(0.005)
    thread.join(10)
    assert len(out) == 1 and isinstance(out[0], str) and out[0] != first
    assert woken == [True]  # one wait, ended by the release


def test_an_uncontended_lock_leaves_no_waiter_keys(b: Backends) -> None:
    if b.client is None:
        pytest.skip("Redis keys")
    for _ in range(3):
        with persisted(b.store, "o:1", M, lock=PessimisticLock()) as order:
            order.send("ADD")
    layout = b.store.layout
    assert b.client.exists(layout.lock_waiters("o:1"), layout.lock_wake("o:1")) == 0


def test_the_release_wakes_the_longest_waiter_first(b: Backends) -> None:
    if b.name != "redis" or b.client.__class__.__module__.startswith("fakeredis"):
        pytest.skip("blocked clients are listed by a real server (CLIENT LIST)")
    _long_slices(b)
    b.store.acquire_lock("o:1", "holder", 30_000)

    def blocked_in_blpop() -> int:
        # other clients of a shared server may block too (XREADGROUP ...)
        return sum(1 for c in b.client.client_list() if "b" in c["flags"] and c["cmd"] == "blpop")

    base = blocked_in_blpop()

    def wait_for(blocked: int) -> None:
        while blocked_in_blpop() < base + blocked:
            threading.Event().wait(0.002)

    def waiter(token: str, seconds: float) -> Callable[[], bool]:
        def run() -> bool:
            assert b.store.acquire_lock("o:1", token, 30_000) > 0
            return bool(b.store.wait_unlocked("o:1", seconds))

        return run

    first, first_out = _in_thread(waiter("w1", 2.5))
    wait_for(1)
    second, second_out = _in_thread(waiter("w2", 1.0))
    wait_for(2)
    b.store.release_lock("o:1", "holder")
    first.join(10)
    second.join(10)
    # one wake-up per release, to the client that blocked first; the other
    # waits on (here until its 1 s runs out: its next open would find the
    # lock taken by the first waiter, whose release wakes it)
    assert (first_out, second_out) == ([True], [False])
    assert b.client.exists(b.store.layout.lock_wake("o:1")) == 0  # consumed
    assert LOCK_WAKE_MS > 1000  # a wake-up outlives a waiter's 250 ms slice


@pytest.fixture(params=["fakeredis", pytest.param("live", marks=pytest.mark.live)])
def async_store_client(request: pytest.FixtureRequest) -> Any:
    fakeredis = pytest.importorskip("fakeredis")
    if request.param == "fakeredis":
        return fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer())
    if not LIVE_URL:
        pytest.skip("XSM_REDIS_URL is not set")
    import redis.asyncio

    return redis.asyncio.Redis.from_url(LIVE_URL)


async def test_an_async_waiter_is_woken_by_the_release(async_store_client: Any) -> None:
    prefix = unique_prefix()
    store = AsyncRedisStore(async_store_client, prefix=prefix, buckets=4)
    store.core.wait_slice_s = 3.0
    woken: list[bool] = []
    wait = store.wait_unlocked_op

    def spied(key: str, seconds: float) -> Any:
        result = yield from wait(key, seconds)
        woken.append(result)
        return result

    store.wait_unlocked_op = spied  # type: ignore[method-assign]
    try:
        async with apersisted(store, "o:1", M) as order:
            await order.asend("ADD")
        async with apersisted(store, "o:1", M, lock=PessimisticLock(timeout=5)) as holder:

            async def waiter() -> int:
                lock = PessimisticLock(timeout=2.8)
                async with apersisted(store, "o:1", M, lock=lock) as order:
                    await order.asend("ADD")
                return int(order.snapshot()["context"]["items"])

            task = asyncio.ensure_future(waiter())
            while not await async_store_client.exists(store.layout.lock_waiters("o:1")):
                await asyncio.sleep(0.005)
            await holder.asend("ADD")
        assert await asyncio.wait_for(task, 10) == 3
        assert woken == [True]
    finally:
        if prefix and LIVE_URL and not type(async_store_client).__module__.startswith("fakeredis"):
            import redis

            sync = redis.Redis.from_url(LIVE_URL)
            delete_namespace(sync, prefix)
            sync.close()
        await async_store_client.aclose()


def test_a_foreign_value_at_the_wake_list_is_a_clear_error(b: Backends) -> None:
    if b.client is None:
        pytest.skip("Redis keys")
    from django_xsm.exceptions import SnapshotCorruptError

    b.store.acquire_lock("o:1", "holder", 30_000)
    b.client.sadd(b.store.layout.lock_wake("o:1"), "foreign")
    with pytest.raises(SnapshotCorruptError, match="WRONGTYPE") as err:
        b.store.wait_unlocked("o:1", 0.05)
    assert "prefix is not shared" in str(err.value)
    assert b.client.smembers(b.store.layout.lock_wake("o:1")) == {b"foreign"}
