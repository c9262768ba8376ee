"""redis-py errors map onto django-xsm errors.

Unavailable (refused, timeout, LOADING, READONLY, MASTERDOWN, OOM) is
``StoreUnavailableError`` with nothing written; another type at an instance
key (WRONGTYPE) or a damaged snapshot hash is ``SnapshotCorruptError``;
``health()`` never raises, names the exception class and never the address.
The replies only a real server produces come from own redis-server
processes (real, not mocked).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_xsm.exceptions import (
    InvalidConfigError,
    SnapshotCorruptError,
    StoreAuthenticationError,
    StoreError,
    StoreUnavailableError,
)
from django_xsm.persistence.records import ClaimRequest, InboxMark, OpenRequest
from django_xsm.redis import LAYOUT_VERSION, AsyncRedisStore, RedisInbox, RedisLog, RedisStore
from tests.redis.helpers import drop_value, entry, layout_of, namespace_state, snap, unit
from tests.redis.servers import free_port
from tests.support import Backends


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
        drop_value(b.client, name, field)
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
    ("reply", "error", "cause"),
    [
        ("-OOM command not allowed when used memory > 'maxmemory'.", StoreUnavailableError, "OOM"),
        (
            "-READONLY You can't write against a read only replica.",
            StoreUnavailableError,
            "READONLY",
        ),
        ("-NOPERM this user has no permissions", StoreAuthenticationError, "NOPERM"),
        ("-MOVED 3999 127.0.0.1:6381", InvalidConfigError, None),
        ("-ERR unknown command 'hgetdel'", StoreError, None),
    ],
)
def test_redis_6_2_script_errors_are_read_by_their_reply_code(
    reply: str, error: type[Exception], cause: str | None
) -> None:
    """Redis 6.2 wraps an error met inside a script in its own; Redis 7 passes
    it on as it is. Both mean the same (the Redis 6.2 CI leg meets the first)."""
    from redis.exceptions import ResponseError

    from django_xsm.redis.errors import translate_errors

    sha = "5bd8c43263237478356f674505239877d4539789"
    wrapped = f"Error running script (call to f_{sha}): @user_script:234: @user_script: 234: "
    for text in (wrapped + reply, reply.removeprefix("-")):
        with pytest.raises(error) as err, translate_errors("k"):
            raise ResponseError(text)
        assert type(err.value) is error
        if cause is not None:
            assert err.value.cause == cause  # type: ignore[attr-defined]


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
