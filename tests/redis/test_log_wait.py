"""``RedisLog.wait`` / ``AsyncRedisLog.wait``: one ``XREAD BLOCK`` on an
instance's stream, what the live stream (django_xsm.stream) follows it with.
On fakeredis and the live server, blocking and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from django_xsm.exceptions import InvalidConfigError
from django_xsm.redis import AsyncRedisLog, RedisLog
from django_xsm.redis.log import MAX_SEQ
from tests.redis.helpers import entry
from tests.redis.test_async import Twins, prefixes, twins  # noqa: F401


def _events(records: list[Any]) -> list[tuple[int, str]]:
    return [(r.seq, r.event_type) for r in records]


def test_wait_returns_the_records_after_a_seq_at_once(b: Any) -> None:
    for name in ("A", "B", "C"):
        b.log.append_next("k", entry(name), version=1)
    started = time.monotonic()
    assert _events(b.log.wait("k", after_seq=1, timeout_s=5)) == [(2, "B"), (3, "C")]
    assert _events(b.log.wait("k", after_seq=0, timeout_s=5, limit=2)) == [(1, "A"), (2, "B")]
    assert time.monotonic() - started < 2  # records there: no blocking


def test_wait_gives_nothing_when_nothing_comes_in_time(b: Any) -> None:
    b.log.append_next("k", entry("A"), version=1)
    started = time.monotonic()
    assert b.log.wait("k", after_seq=1, timeout_s=0.2) == []
    assert b.log.wait("missing", after_seq=0, timeout_s=0.05) == []
    assert time.monotonic() - started >= 0.2


def test_wait_wakes_for_a_record_appended_meanwhile(b: Any) -> None:
    b.log.append_next("k", entry("A"), version=1)
    timer = threading.Timer(0.2, lambda: b.log.append_next("k", entry("LATE"), version=2))
    timer.start()
    try:
        assert _events(b.log.wait("k", after_seq=1, timeout_s=2)) == [(2, "LATE")]
    finally:
        timer.join()


def test_wait_skips_trimmed_records(b: Any) -> None:
    for name in ("A", "B", "C", "D"):
        b.log.append_next(
            "k", entry(name, ts=1_000 if name in "AB" else 2_000_000_000_000), version=1
        )
    b.log.purge_older_than(1_000_000, key="k")  # A and B are gone
    assert _events(b.log.wait("k", after_seq=0, timeout_s=1)) == [(3, "C"), (4, "D")]


def test_wait_without_time_reads_without_blocking(b: Any) -> None:
    b.log.append_next("k", entry("A"), version=1)
    assert _events(b.log.wait("k", after_seq=0, timeout_s=0)) == [(1, "A")]
    assert b.log.wait("k", after_seq=1, timeout_s=0) == []
    assert b.log.wait("k", after_seq=1, timeout_s=float("nan")) == []  # no time, no forever


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"after_seq": -1}, "after_seq"),
        ({"after_seq": MAX_SEQ + 1}, "after_seq"),
        ({"after_seq": True}, "after_seq"),
        ({"after_seq": "3"}, "after_seq"),
        ({"after_seq": 0, "limit": 0}, "limit"),
        ({"after_seq": 0, "timeout_s": "1"}, "seconds"),
    ],
)
def test_wait_refuses_bad_arguments_before_any_io(b: Any, kwargs: Any, path: str) -> None:
    kwargs = {"timeout_s": 0.1, **kwargs}
    with pytest.raises(InvalidConfigError) as caught:
        b.log.wait("k", **kwargs)
    assert caught.value.path == path


def test_a_wait_is_cut_to_half_the_socket_timeout(flavour: str) -> None:
    from tests.support import LIVE_URL

    if flavour != "live" or not LIVE_URL:
        pytest.skip("a socket timeout needs a real connection (XSM_REDIS_URL)")
    import redis

    client = redis.Redis.from_url(LIVE_URL, socket_timeout=0.4)
    try:
        log = RedisLog(client, prefix="xsmtest-wait-slice")
        assert log.core.wait_slice_s == pytest.approx(0.2)
        started = time.monotonic()
        assert log.wait("k", after_seq=0, timeout_s=30) == []  # no socket timeout error
        assert time.monotonic() - started < 1
    finally:
        client.close()


async def test_the_async_twin_waits_without_holding_the_loop(twins: Twins, prefixes: Any) -> None:  # noqa: F811
    prefix = prefixes()
    log = AsyncRedisLog(twins.async_client, prefix=prefix)
    sync_log = RedisLog(twins.sync_client, prefix=prefix)
    await log.append_next("k", entry("A"), version=1)
    assert _events(await log.wait("k", after_seq=0, timeout_s=1)) == [(1, "A")]
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.create_task(tick())
    later = threading.Timer(0.3, lambda: sync_log.append_next("k", entry("B"), version=2))
    later.start()
    try:
        assert _events(await log.wait("k", after_seq=1, timeout_s=3)) == [(2, "B")]
    finally:
        ticker.cancel()
        later.join()
    assert ticks >= 5  # the loop went on while the XREAD blocked
    assert await log.wait("k", after_seq=2, timeout_s=0.05) == []
