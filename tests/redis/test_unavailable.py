"""Replies only a real server gives, from own redis-server processes (real,
not mocked): OOM, READONLY, MASTERDOWN, LOADING and a paused server are
``StoreUnavailableError`` and write nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis._parsers.base import BaseParser
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_xsm.exceptions import ConflictError, StoreUnavailableError
from django_xsm.persistence.records import ClaimRequest, InboxMark, OpenRequest
from django_xsm.redis import RedisStore
from tests.redis.helpers import entry, namespace_state, snap, unit
from tests.redis.servers import (
    RedisServer,
    free_port,
    needs_redis_server,
    server_version,
    wait_until,
)
from tests.support import Backends, redis_backends, unique_prefix

# The cause of a write refused inside a script: Redis 6.2 wraps the reply in a
# script error, which redis-py leaves a ResponseError (the cause is the reply's
# code); Redis 7 passes it on, and redis-py maps it to its class.
OOM, READONLY = (
    ("OOM", "READONLY") if server_version() < (7, 0) else ("OutOfMemoryError", "ReadOnlyError")
)

# The cause of a MASTERDOWN reply: redis-py's class when it maps the reply to
# one (6.0+), else the reply's code (5.x leaves it a ResponseError).
MASTERDOWN = "MasterDownError" if "MASTERDOWN" in BaseParser.EXCEPTION_CLASSES else "MASTERDOWN"


def no_retry_client(port: int, **kw: Any) -> redis.Redis:
    kw.setdefault("socket_timeout", 0.5)
    kw.setdefault("socket_connect_timeout", 0.5)
    return redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0), **kw)


# --- replies only a real server gives (own redis-server each) -------------------------


@pytest.fixture
def server() -> Iterator[RedisServer]:
    s = RedisServer().start()
    try:
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def sb(server: RedisServer) -> Backends:
    return redis_backends(no_retry_client(server.port), unique_prefix())


def _write_attempts(sb: Backends) -> list[Any]:
    c = ClaimRequest("acct", "order:1", "k", "fp", "w", 5_000)
    return [
        lambda: sb.store.commit(
            unit(
                "order:1",
                1,
                snap(items=5),
                marks=(InboxMark(c, {"ok": 1}, 60_000),),
                log_entries=(entry(),),
            ),
            inbox=sb.inbox,
            log=sb.log,
        ),
        lambda: sb.store.save("order:2", snap(), expected_version=0),
        lambda: sb.store.open(OpenRequest("order:1", "tok", 5_000, (c,)), inbox=sb.inbox),
        lambda: sb.store.acquire_lock("order:1", "tok", 5_000),
        lambda: sb.inbox.claim(c),
        lambda: sb.log.append_next("order:1", entry(), version=1),
        lambda: sb.store.forget("order:1"),
    ]


def _check_unavailable(sb: Backends, reason: str, before: Any, *, deletes: bool = True) -> None:
    attempts = _write_attempts(sb)
    for attempt in attempts if deletes else attempts[:-1]:
        with pytest.raises(StoreUnavailableError) as err:
            attempt()
        assert err.value.cause == reason
    assert namespace_state(sb.client, sb.store.prefix) == before


pytestmark_fault = [needs_redis_server, pytest.mark.fault, pytest.mark.timeout(60)]


@pytest.mark.parametrize("_", [None], ids=["own-server"])
class TestRealServerReplies:
    pytestmark = pytestmark_fault

    def test_oom_is_unavailable_and_writes_nothing(self, sb: Backends, _: None) -> None:
        sb.store.save("order:1", snap(), expected_version=0)
        before = namespace_state(sb.client, sb.store.prefix)
        sb.client.config_set("maxmemory-policy", "noeviction")
        sb.client.config_set("maxmemory", 1)
        try:
            # forget() only frees memory, and Redis lets such a script run
            _check_unavailable(sb, OOM, before, deletes=False)
            assert sb.store.load("order:1").version == 1  # reads still work
            assert sb.store.health()["error"] == OOM
        finally:
            sb.client.config_set("maxmemory", 0)
        assert sb.store.save("order:1", snap(items=1), expected_version=1) == 2

    def test_readonly_replica_is_unavailable_and_writes_nothing(
        self, sb: Backends, _: None
    ) -> None:
        sb.store.save("order:1", snap(), expected_version=0)
        before = namespace_state(sb.client, sb.store.prefix)
        sb.client.replicaof("127.0.0.1", free_port())  # a master that never answers
        try:
            _check_unavailable(sb, READONLY, before)
            assert sb.store.load("order:1").version == 1  # stale reads are served
            # ...but readiness must fail: a commit cannot land here
            assert sb.store.health() == {"ok": False, "backend": "redis", "error": READONLY}
        finally:
            sb.client.replicaof("no", "one")

    def test_masterdown_is_unavailable_for_reads_and_writes(self, sb: Backends, _: None) -> None:
        sb.store.save("order:1", snap(), expected_version=0)
        before = namespace_state(sb.client, sb.store.prefix)
        sb.client.config_set("replica-serve-stale-data", "no")
        sb.client.replicaof("127.0.0.1", free_port())
        try:
            for attempt in [*_write_attempts(sb), lambda: sb.store.load("order:1")]:
                with pytest.raises(StoreUnavailableError) as err:
                    attempt()
                assert err.value.cause == MASTERDOWN
            # health() reads the schema marker and writes: refused either way
            assert sb.store.health() in (
                {"ok": False, "backend": "redis", "error": MASTERDOWN},
                {"ok": False, "backend": "redis", "error": READONLY},
            )
        finally:
            sb.client.replicaof("no", "one")
        assert namespace_state(sb.client, sb.store.prefix) == before

    @pytest.mark.skipif(
        server_version() < (7, 0),
        reason="needs loading-process-events-interval-bytes (Redis 7) to answer while loading",
    )
    def test_loading_is_unavailable(self, server: RedisServer, _: None) -> None:
        """A restarting server loading its dataset answers LOADING (here made
        slow with ``key-load-delay``)."""
        c = server.client()
        prefix = unique_prefix()
        b = redis_backends(c, prefix)
        b.store.save("order:1", snap(), expected_version=0)
        pipe = c.pipeline(transaction=False)
        for i in range(5_000):
            pipe.set(f"fill:{i}", "x" * 64)
        pipe.execute()
        c.save()
        server.stop()
        server.extra = [
            "--key-load-delay",
            "500",
            "--loading-process-events-interval-bytes",
            "1024",
        ]
        server.start(wait=False)
        client = no_retry_client(server.port, socket_timeout=2.0)
        store = RedisStore(client, prefix=prefix)  # the marker read fails quietly

        def loading_seen() -> StoreUnavailableError | None:
            try:
                store.load("order:1")
            except StoreUnavailableError as exc:
                return exc if exc.cause == "BusyLoadingError" else None
            raise AssertionError("the dataset loaded before LOADING was seen")

        wait_until(loading_seen, timeout=10, what="a LOADING reply")
        assert store.health()["error"] == "BusyLoadingError"
        with pytest.raises(StoreUnavailableError) as err:
            store.commit(unit("order:1", 1, snap(items=1)))
        assert err.value.cause == "BusyLoadingError"
        wait_until(lambda: client.info("persistence")["loading"] == 0, timeout=30, what="loading")
        assert store.load("order:1").version == 1
        with pytest.raises(ConflictError):
            store.save("order:1", snap(), expected_version=0)

    def test_a_paused_server_is_unavailable_within_the_socket_timeout(
        self, server: RedisServer, sb: Backends, _: None
    ) -> None:
        sb.store.save("order:1", snap(), expected_version=0)
        server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as err:
                sb.store.load("order:1")
            elapsed = time.monotonic() - started
            assert err.value.cause == "TimeoutError"
            assert elapsed < 0.5 + 0.4
            assert sb.store.health()["error"] == "TimeoutError"
        finally:
            server.resume()
        assert sb.store.load("order:1").version == 1


@pytest.mark.timeout(30)
@needs_redis_server
@pytest.mark.fault
async def test_a_paused_server_is_unavailable_within_the_timeout_for_asyncio_too(
    server: RedisServer,
) -> None:
    import redis.asyncio

    from django_xsm.redis import AsyncRedisStore

    client = redis.asyncio.Redis(
        port=server.port,
        socket_timeout=0.5,
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
    store = AsyncRedisStore(client, prefix=unique_prefix())
    assert await store.save("order:1", snap(), expected_version=0) == 1
    server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as err:
            await store.commit(unit("order:1", 1, snap(items=1)))
        assert time.monotonic() - started < 0.5 + 0.4
        assert err.value.cause == "TimeoutError"
        assert (await store.health())["error"] == "TimeoutError"
    finally:
        server.resume()
    record = await store.load("order:1")
    assert record.version in (1, 2)  # the commit ran after SIGCONT, or never
    await client.aclose()
