"""Findings of the outside checks (issue 12), Redis part: the async token
lock, construction without I/O, namespace resets, whether the server
persists, credentials errors, prefixes and TTLs, and planted records that
must read as SnapshotCorruptError. fakeredis and live; the servers with a
password, persistence settings or a pause are our own ``redis-server``."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from django_xsm.exceptions import (
    ConflictError,
    InvalidConfigError,
    LockTimeoutError,
    SnapshotCorruptError,
    SnapshotTooLargeError,
    StoreAuthenticationError,
    StoreUnavailableError,
)
from django_xsm.persistence import PessimisticLock, apersisted, persisted
from django_xsm.persistence.arguments import validate_prefix
from django_xsm.persistence.records import OpenRequest
from django_xsm.redis import AsyncRedisStore, RedisStore
from tests.redis.helpers import layout_of, sent, snap
from tests.redis.servers import RedisServer, needs_redis_server, redis_server, wait_until
from tests.support import LIVE_URL, Backends, delete_namespace, order_machine, unique_prefix

M = order_machine()


@pytest.fixture(params=["fakeredis", pytest.param("live", marks=pytest.mark.live)])
async def astore(request: pytest.FixtureRequest) -> Any:
    """An AsyncRedisStore (with its blocking twin on the same server)."""
    prefix = unique_prefix()
    if request.param == "fakeredis":
        import fakeredis
        import fakeredis.aioredis

        server = fakeredis.FakeServer()
        sync, aio = fakeredis.FakeRedis(server=server), fakeredis.aioredis.FakeRedis(server=server)
    else:
        if not LIVE_URL:
            pytest.skip("XSM_REDIS_URL is not set")
        import redis.asyncio

        sync, aio = redis.Redis.from_url(LIVE_URL), redis.asyncio.Redis.from_url(LIVE_URL)
    store = AsyncRedisStore(aio, prefix=prefix, buckets=4)
    store.sync = RedisStore(sync, prefix=prefix, buckets=4)  # type: ignore[attr-defined]
    yield store
    delete_namespace(sync, prefix)
    await aio.aclose()


# --- 2. AsyncRedisStore.lock() ---------------------------------------------------------


async def test_async_store_lock_is_the_token_lock_on_its_own(astore: Any) -> None:
    await astore.save("o:1", snap(), expected_version=0)
    async with astore.lock("o:1", timeout=0) as token:
        assert await astore.lock_holder("o:1") == token
        with pytest.raises(LockTimeoutError):
            async with astore.lock("o:1", timeout=0.02):
                pytest.fail("two holders")
        with pytest.raises(LockTimeoutError):
            async with apersisted(astore, "o:1", M, lock=PessimisticLock(timeout=0)):
                pass
        with pytest.raises(ConflictError) as err:
            async with apersisted(astore, "o:1", M) as order:
                order.send("ADD")
        assert err.value.reason == "lock" and err.value.held_lock is False
        # the blocking twin sees the same lock
        assert astore.sync.lock_holder("o:1") == token
    assert await astore.lock_holder("o:1") is None
    async with apersisted(astore, "o:1", M, lock=PessimisticLock(timeout=0)) as order:
        order.send("ADD")
    assert (await astore.load("o:1")).version == 2
    with pytest.raises(TypeError, match="async with"):
        with astore.lock("o:1"):
            pass


async def test_async_max_snapshot_bytes_is_honoured_on_load(astore: Any) -> None:
    await astore.save("o:1", snap(note="x" * 300), expected_version=0)
    astore.max_snapshot_bytes = 100
    with pytest.raises(SnapshotTooLargeError):
        await astore.load("o:1")


# --- 1. OPEN sends the size, not the bytes ----------------------------------------------


def test_an_oversized_record_costs_its_size_not_its_bytes(b: Backends) -> None:
    b.store.save("o:1", snap(note="x" * 50_000), expected_version=0)
    b.store.max_snapshot_bytes = 1_000
    with pytest.raises(SnapshotTooLargeError) as err:
        b.store.open(OpenRequest("o:1", "tok", 5_000))
    assert err.value.size > 50_000
    assert b.store.lock_holder("o:1") is None  # nothing taken
    replies: list[Any] = []
    original = b.client.parse_response

    def spy(connection: Any, command: Any, **options: Any) -> Any:
        reply = original(connection, command, **options)
        replies.append(reply)
        return reply

    b.client.parse_response = spy  # type: ignore[method-assign]
    try:
        with pytest.raises(SnapshotTooLargeError):
            b.store.load("o:1")
    finally:
        del b.client.parse_response
    assert len(repr(replies)) < 1_000  # no snapshot on the wire


# --- 9. construction does no I/O ---------------------------------------------------------


def test_construction_sends_nothing(b: Backends) -> None:
    with sent(b.client) as seen:
        store = RedisStore(b.client, prefix=b.store.prefix)
    assert seen.trips == [] and store.layout is None
    assert store.load("nothing") is None and store.layout is not None


@needs_redis_server
@pytest.mark.fault
def test_a_store_built_while_redis_is_paused_is_built_at_once() -> None:
    with redis_server() as server:
        server.pause()
        try:
            started = time.monotonic()
            store = RedisStore(server.client(socket_timeout=0.5), prefix=unique_prefix())
            assert time.monotonic() - started < 0.3
            with pytest.raises(StoreUnavailableError):
                store.load("k")  # the first use meets the outage, within the timeout
        finally:
            server.resume()
        assert store.load("k") is None


# --- 10. a namespace reset is detected ---------------------------------------------------


def test_a_namespace_recreated_after_data_loss_is_reported_once(
    b: Backends, caplog: pytest.LogCaptureFixture
) -> None:
    b.store.save("o:1", snap(), expected_version=0)
    first = b.store.health()
    assert first["ok"] and "namespace_reset" not in first and not b.store.namespace_reset
    delete_namespace(b.client, b.store.prefix)  # what a restart without persistence does
    with caplog.at_level(logging.ERROR, logger="django_xsm.redis"):
        after = b.store.health()
        again = b.store.health()
    assert (
        after["ok"] is True
        and after["namespace_reset"] is True
        and again
        == {
            **again,
            "namespace_reset": True,
        }
    )
    errors = [r for r in caplog.records if "namespace" in r.getMessage()]
    assert len(errors) == 1 and "Redis lost its data" in errors[0].getMessage()
    assert errors[0].levelno == logging.ERROR
    # another process that saw the old id finds out at its own check
    other = RedisStore(b.client, prefix=b.store.prefix)
    other.core.state.namespace_id = "the id it saw before"
    other.health()
    assert other.namespace_reset
    # a process that started after the reset has nothing to compare with
    assert "namespace_reset" not in RedisStore(b.client, prefix=b.store.prefix).health()


@needs_redis_server
@pytest.mark.fault
def test_a_restart_without_persistence_is_reported_as_a_reset() -> None:
    with redis_server() as server:
        store = RedisStore(server.client(), prefix="shop")
        store.save("o:1", snap(), expected_version=0)
        assert "namespace_reset" not in store.health()
        server.restart()
        health = store.health()
        assert health["ok"] and health["namespace_reset"] is True
        assert str(server.port) not in repr(health)
        assert store.persists_data() is False


@needs_redis_server
@pytest.mark.fault
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--appendonly", "yes"], True),
        # two arguments: Redis 6.2 reads a single "3600 1" as no snapshots
        (["--save", "3600", "1"], True),
        ([], False),
        (["--rename-command", "CONFIG", ""], None),
    ],
    ids=["appendonly", "save", "none", "config-renamed"],
)
def test_persists_data_reports_the_servers_setting(extra: list[str], expected: Any) -> None:
    server = RedisServer(extra=extra).start()
    try:
        assert RedisStore(server.client(), prefix="p").persists_data() is expected
    finally:
        server.cleanup()


# --- 12. credentials errors -----------------------------------------------------------------

PASSWORD = "s3cret-pass"


@needs_redis_server
@pytest.mark.fault
def test_wrong_credentials_are_an_authentication_error_not_unavailable() -> None:
    server = RedisServer(extra=["--requirepass", PASSWORD]).start(wait=False)
    try:
        admin = server.client(password=PASSWORD)
        wait_until(admin.ping, timeout=10, what="the password-protected server")
        admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "~*", "+get", "+ping")
        attempts = {
            "wrong password": server.client(password="nope"),
            "no password": server.client(),
            "missing ACL": server.client(username="reader", password="pw"),
        }
        for what, client in attempts.items():
            store = RedisStore(client, prefix="shop")
            with pytest.raises(StoreAuthenticationError) as err:
                store.save("o:1", snap(), expected_version=0)
            assert not isinstance(err.value, StoreUnavailableError), what
            text = str(err.value)
            assert "credentials" in text and "retrying will not help" in text, what
            assert PASSWORD not in text and "nope" not in text and str(server.port) not in text
            health = store.health()
            assert health["ok"] is False and health["error"] in (
                "AuthenticationError",
                "NOPERM",
                "NoPermissionError",
            ), (what, health)
        assert RedisStore(admin, prefix="shop").load("o:1") is None
    finally:
        server.cleanup()


# --- 6. prefixes -------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["shop:", "shop\n", "a:b:", ":"])
def test_a_prefix_with_a_trailing_colon_or_newline_is_refused(prefix: str) -> None:
    import fakeredis

    with pytest.raises(InvalidConfigError) as err:
        RedisStore(fakeredis.FakeRedis(), prefix=prefix)
    assert err.value.path == "prefix"
    if prefix == "shop:":
        assert "prefix='shop'" in str(err.value)
    assert validate_prefix("shop:orders") == "shop:orders"


# --- 7. ttl_s ------------------------------------------------------------------------------------


@pytest.mark.parametrize("ttl_s", [0.0005, 0, float("inf"), float("nan"), -3, True])
def test_a_ttl_that_would_turn_expiry_off_is_refused(ttl_s: Any) -> None:
    import fakeredis

    for build in (RedisStore, AsyncRedisStore):
        client = fakeredis.aioredis.FakeRedis() if build is AsyncRedisStore else None
        with pytest.raises(InvalidConfigError) as err:
            build(client or fakeredis.FakeRedis(), prefix="p", ttl_s=ttl_s)
        assert err.value.path == "ttl_s"


def test_ttl_s_set_after_construction_is_used_by_the_next_commit(b: Backends) -> None:
    b.store.ttl_s = 60
    b.store.save("o:1", snap(), expected_version=0)
    pttl = b.client.pttl(layout_of(b.store).snapshot("o:1"))
    assert 0 < pttl <= 60_000


# --- 14. planted records --------------------------------------------------------------------------


def _deep(levels: int) -> bytes:
    return b'{"context":' + b"[" * levels + b"]" * levels + b"}"


PLANTED = {
    "deep": {"d": _deep(100_000), "v": "1"},
    "bad-uuid-tag": {"d": b'{"context":{"$xsm":"uuid","v":5}}', "v": "1"},
    "bad-bytes-tag": {"d": b'{"context":{"$xsm":"bytes","v":[]}}', "v": "1"},
    "unhashable-tag": {"d": b'{"context":{"$xsm":[1],"v":1}}', "v": "1"},
    "infinite-timer": {
        "d": b"{}",
        "v": "1",
        "tf": b'{"e:x":{"attempts":1,"next_attempt_ms":Infinity}}',
    },
    "timer-list": {"d": b"{}", "v": "1", "tf": b"[1, 2]"},
    "huge-update-time": {"d": b"{}", "v": "1", "u": "9" * 30},
    "negative-version": {"d": b"{}", "v": "-4"},
    "not-utf8": {"d": b"\xff\xfe", "v": "1"},
}


@pytest.mark.parametrize("fields", PLANTED.values(), ids=PLANTED.keys())
def test_a_planted_record_is_snapshot_corrupt_with_its_key(b: Backends, fields: Any) -> None:
    key = layout_of(b.store).snapshot("o:1")
    b.client.hset(key, mapping=fields)
    for call in (
        lambda: b.store.load("o:1"),
        lambda: b.store.open(OpenRequest("o:1")),
        lambda: persisted(b.store, "o:1", M).__enter__(),
    ):
        with pytest.raises(SnapshotCorruptError) as err:
            call()
        assert err.value.key == "o:1"
    record_or_error = None
    try:
        record_or_error = b.store.machine_ids(["o:1"])
    except SnapshotCorruptError as exc:
        record_or_error = exc
    assert record_or_error is not None


def test_a_redis_prefix_store_rejects_argument_types_before_any_io(b: Backends) -> None:
    with sent(b.client) as seen:
        for call in (
            lambda: b.store.lock_holder(b"k"),
            lambda: b.store.list_page(limit="5"),
            lambda: b.store.dead_letters(limit=None),
            lambda: b.store.park("k", reason=5),
        ):
            with pytest.raises(InvalidConfigError):
                call()
    assert seen.trips == []
