"""redis-py errors map onto django-xsm errors.

Unavailable (refused, timeout, LOADING, READONLY, MASTERDOWN, OOM) is
``StoreUnavailableError`` with nothing written; another type at an instance
key (WRONGTYPE) or a damaged snapshot hash is ``SnapshotCorruptError``;
``health()`` never raises, names the exception class and never the address.
The replies only a real server produces come from own redis-server
processes (real, not mocked).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_xsm.exceptions import (
    ConflictError,
    SnapshotCorruptError,
    StoreError,
    StoreUnavailableError,
)
from django_xsm.persistence.records import ClaimRequest, InboxMark, OpenRequest
from django_xsm.redis import LAYOUT_VERSION, AsyncRedisStore, RedisInbox, RedisLog, RedisStore
from tests.redis.helpers import entry, layout_of, namespace_state, snap, unit
from tests.redis.servers import RedisServer, free_port, needs_redis_server, wait_until
from tests.support import Backends, redis_backends, unique_prefix


def no_retry_client(port: int, **kw: Any) -> redis.Redis:
    kw.setdefault("socket_timeout", 0.5)
    kw.setdefault("socket_connect_timeout", 0.5)
    return redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0), **kw)


def assert_no_address(text: str, port: int) -> None:
    assert "127.0.0.1" not in text and str(port) not in text and "localhost" not in text


# --- WRONGTYPE and damaged records (fakeredis and live) ------------------------------


@pytest.mark.parametrize("kind", ["string", "list", "zset", "stream"])
def test_another_type_at_the_snapshot_key_is_snapshot_corrupt(b: Backends, kind: str) -> None:
    name = layout_of(b.store).snapshot("order:1")
    {
        "string": lambda: b.client.set(name, "x"),
        "list": lambda: b.client.rpush(name, "x"),
        "zset": lambda: b.client.zadd(name, {"x": 1}),
        "stream": lambda: b.client.xadd(name, {"x": 1}),
    }[kind]()
    before = namespace_state(b.client, b.store.prefix)
    for action in (
        lambda: b.store.load("order:1"),
        lambda: b.store.save("order:1", snap(), expected_version=0),
        lambda: b.store.commit(unit("order:1", 0, snap(), log_entries=(entry(),)), log=b.log),
        lambda: b.store.open(OpenRequest("order:1", "tok", 1_000)),
        lambda: b.store.delete("order:1"),
        lambda: b.store.forget("order:1"),
    ):
        with pytest.raises(SnapshotCorruptError) as err:
            action()
        assert err.value.key == "order:1"
        assert "WRONGTYPE" in str(err.value)
    assert namespace_state(b.client, b.store.prefix) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("d", None),
        ("d", b"\xff\xfenot json"),
        ("d", b"[1, 2]"),
        ("v", b"seven"),
        ("v", None),
        ("u", b"yesterday"),
        ("tf", b"{broken"),
        ("tf", b'{"e": {"attempts": "many"}}'),
    ],
)
def test_a_damaged_snapshot_hash_is_snapshot_corrupt(b: Backends, field: str, value: Any) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    name = layout_of(b.store).snapshot("order:1")
    if value is None:
        b.client.hdel(name, field)
    else:
        b.client.hset(name, field, value)
    with pytest.raises(SnapshotCorruptError) as err:
        b.store.load("order:1")
    assert err.value.key == "order:1"


def test_a_wrong_type_log_stream_is_snapshot_corrupt_for_the_log(b: Backends) -> None:
    name = layout_of(b.store).log("order:1")
    b.client.set(name, "x")
    for action in (
        lambda: b.log.read("order:1"),
        lambda: b.log.append_next("order:1", entry(), version=1),
        lambda: b.log.purge_older_than(2_000_000_000, key="order:1"),
    ):
        with pytest.raises(SnapshotCorruptError):
            action()
    assert b.client.get(name) == b"x"


def test_a_wrong_type_inbox_row_hash_is_snapshot_corrupt(b: Backends) -> None:
    c = ClaimRequest("acct", "order:1", "k", "fp", "w", 1_000)
    name = layout_of(b.store).inbox("acct", "order:1")
    b.client.set(name, "x")
    with pytest.raises(SnapshotCorruptError):
        b.inbox.claim(c)
    with pytest.raises(SnapshotCorruptError):
        b.inbox.mark(InboxMark(c, {}, 1_000))
    assert b.client.get(name) == b"x"


@pytest.mark.parametrize("raw", [b"garbage{", b"[1, 2]", b'{"x": "soon"}'])
def test_an_unreadable_inbox_row_reads_as_absent_everywhere(b: Backends, raw: bytes) -> None:
    """claim() and mark() overwrite a row they cannot read; get() must not
    crash on it either."""
    layout = layout_of(b.store)
    name, field = layout.inbox("acct", "order:1"), layout.inbox_field("order:1", "k")
    b.client.hset(name, field, raw)
    assert b.inbox.get("acct", "order:1", "k") is None
    c = ClaimRequest("acct", "order:1", "k", "fp", "w", 60_000)
    assert b.inbox.claim(c).status == "claimed"
    assert b.inbox.get("acct", "order:1", "k")["state"] == "in_flight"


def test_an_unreadable_receipt_reads_as_none(b: Backends) -> None:
    layout = layout_of(b.store)
    name, field = layout.inbox("acct", "order:1"), layout.inbox_field("order:1", "k")
    b.client.hset(name, field, '{"s":"d","fp":"fp","x":"99999999999999","r":"{bad"}')
    assert b.inbox.get("acct", "order:1", "k")["receipt"] is None
    c = ClaimRequest("acct", "order:1", "k", "fp", "w", 60_000)
    assert b.inbox.claim(c).status == "done"


# --- health -------------------------------------------------------------------------


def test_health_reports_ok_with_layout_and_latency(b: Backends) -> None:
    health = b.store.health()
    assert health["ok"] is True and health["backend"] == "redis"
    assert health["layout"] == LAYOUT_VERSION and health["buckets"] == 4
    assert health["latency_ms"] >= 0


def test_health_of_a_namespace_with_a_newer_layout_says_so_without_raising(b: Backends) -> None:
    fresh = RedisStore(b.client, prefix=b.store.prefix + "h")
    b.client.hset("{" + b.store.prefix + "h}:schema", "layout", LAYOUT_VERSION + 1)
    fresh.core.state.layout = None  # as in a process started after the upgrade
    try:
        assert fresh.health() == {"ok": False, "backend": "redis", "error": "StoreError"}
    finally:
        b.client.delete("{" + b.store.prefix + "h}:schema")


def test_connection_refused_is_unavailable_and_health_hides_the_address() -> None:
    port = free_port()  # nothing listens here
    client = no_retry_client(port)
    store = RedisStore(client, prefix="p")  # the marker is read on first use instead
    inbox, log = RedisInbox(client, prefix="p"), RedisLog(client, prefix="p")
    for action in (
        lambda: store.load("k"),
        lambda: store.save("k", snap(), expected_version=0),
        lambda: store.due_keys(1),
        lambda: inbox.claim(ClaimRequest("a", "k", "i", "fp", "w", 1)),
        lambda: log.read("k"),
    ):
        with pytest.raises(StoreUnavailableError) as err:
            action()
        assert err.value.cause == "ConnectionError"
        assert_no_address(str(err.value), port)
    health = store.health()
    assert health == {"ok": False, "backend": "redis", "error": "ConnectionError"}
    assert_no_address(repr(health), port)


async def test_async_health_hides_the_address_too() -> None:
    import redis.asyncio

    port = free_port()
    client = redis.asyncio.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    store = AsyncRedisStore(client, prefix="p")
    with pytest.raises(StoreUnavailableError) as err:
        await store.load("k")
    assert_no_address(str(err.value), port)
    health = await store.health()
    assert health == {"ok": False, "backend": "redis", "error": "ConnectionError"}
    await client.aclose()


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
            _check_unavailable(sb, "OutOfMemoryError", before, deletes=False)
            assert sb.store.load("order:1").version == 1  # reads still work
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
            _check_unavailable(sb, "ReadOnlyError", before)
            assert sb.store.load("order:1").version == 1  # stale reads are served
            assert sb.store.health()["ok"] is True
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
                assert err.value.cause == "MasterDownError"
            assert sb.store.health() == {
                "ok": False,
                "backend": "redis",
                "error": "MasterDownError",
            }
        finally:
            sb.client.replicaof("no", "one")
        assert namespace_state(sb.client, sb.store.prefix) == before

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


def test_other_refusals_are_store_error_naming_the_reply_code_only() -> None:
    from redis.exceptions import ResponseError

    from django_xsm.redis.errors import translate_errors

    with pytest.raises(StoreError) as err, translate_errors("k"):
        raise ResponseError("ERR something about 10.1.2.3:6379 went wrong")
    assert type(err.value) is StoreError and err.value.key == "k"
    assert "ERR" in str(err.value) and "10.1.2.3" not in str(err.value)
    for reply, reason in [
        ("LOADING Redis is loading the dataset in memory", "LOADING"),
        ("BUSY Redis is busy running a script", "BUSY"),
        ("MISCONF Errors writing to the AOF file", "MISCONF"),
        ("NOREPLICAS Not enough good replicas", "NOREPLICAS"),
        ("TRYAGAIN Multiple keys request during rehashing", "TRYAGAIN"),
    ]:
        with pytest.raises(StoreUnavailableError) as unavailable, translate_errors("k"):
            raise ResponseError(reply)
        assert unavailable.value.cause == reason


@pytest.mark.parametrize(
    "claim",
    [
        ClaimRequest("acct", "order:1", "", "fp", "w", 1_000),
        ClaimRequest("acct", "order:1", "a\x00b", "fp", "w", 1_000),
        ClaimRequest("acct", "order:1", "x" * 600, "fp", "w", 1_000),
        ClaimRequest("ac\nct", "order:1", "k", "fp", "w", 1_000),
    ],
    ids=["empty", "nul", "long", "scope-newline"],
)
def test_unusable_idempotency_keys_and_scopes_are_refused_before_any_write(
    b: Backends, claim: ClaimRequest
) -> None:
    from django_xsm.exceptions import InvalidConfigError
    from django_xsm.persistence.records import InboxRelease

    before = namespace_state(b.client, b.store.prefix)
    for action in (
        lambda: b.inbox.claim(claim),
        lambda: b.inbox.mark(InboxMark(claim, {}, 1_000)),
        lambda: b.inbox.release(InboxRelease(claim)),
        lambda: b.store.open(OpenRequest("order:1", "", 0, (claim,)), inbox=b.inbox),
        lambda: b.store.commit(
            unit("order:1", 0, snap(), marks=(InboxMark(claim, {}, 1_000),)),
            inbox=b.inbox,
            log=b.log,
        ),
    ):
        with pytest.raises(InvalidConfigError):
            action()
    assert namespace_state(b.client, b.store.prefix) == before
