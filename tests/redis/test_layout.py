"""Key layout (docs/redis.md, "Key layout"): hash tags, one slot per script call, the schema
marker, prefix validation and literal glob characters."""

from __future__ import annotations

from typing import Any

import pytest
from redis.crc import key_slot

from django_xsm.exceptions import InvalidConfigError, SnapshotCorruptError, StoreError
from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, persisted
from django_xsm.persistence.records import (
    ClaimRequest,
    InboxMark,
    InboxRelease,
    OpenRequest,
    TimerFailure,
)
from django_xsm.redis import (
    LAYOUT_VERSION,
    AsyncRedisStore,
    KeyLayout,
    RedisInbox,
    RedisLog,
    RedisStore,
    escape_glob,
)
from django_xsm.redis.calls import Call
from django_xsm.redis.client import SyncDriver
from django_xsm.redis.core import Many
from tests.redis.helpers import entry, layout_of, namespace_keys, snap, unit
from tests.support import Backends, order_machine, unique_prefix


def tag(name: bytes | str) -> str:
    text = name.decode() if isinstance(name, bytes) else name
    return text[: text.index("}") + 1]


def claim_req(idem: str = "k1", owner: str = "o1", key: str = "order:1") -> ClaimRequest:
    return ClaimRequest("acct", key, idem, "fp", owner, 5_000)


# --- hash tags and slots -----------------------------------------------------------


def test_every_key_of_one_instance_shares_its_hash_tag(b: Backends) -> None:
    layout = layout_of(b.store)
    b.inbox.claim(claim_req())
    b.store.acquire_lock("order:1", "tok", 5_000)
    b.store.commit(
        unit(
            "order:1",
            0,
            snap(),
            lock_token="tok",
            next_due_ms=5,
            state_ids=("order", "order.cart"),
            marks=(InboxMark(claim_req(), {}, 60_000),),
            log_entries=(entry(),),
        ),
        inbox=b.inbox,
        log=b.log,
    )
    expected = layout.tag_of("order:1")
    assert expected == "{" + b.store.prefix + ":" + str(layout.bucket("order:1")) + "}"
    instance_keys = [
        layout.snapshot("order:1"),
        layout.lock("order:1"),
        layout.log("order:1"),
        layout.inbox("acct", "order:1"),
    ]
    for name in instance_keys:
        assert b.client.exists(name) == 1, name
        assert tag(name) == expected
    names = namespace_keys(b.client, b.store.prefix)
    assert {tag(n) for n in names} <= {"{" + b.store.prefix + "}", expected}
    assert len({key_slot(n) for n in names if tag(n) == expected}) == 1


class _Spy:
    def __init__(self) -> None:
        self.calls: list[Call] = []

    def record(self, request: Any) -> None:
        if isinstance(request, Call):
            self.calls.append(request)
        elif isinstance(request, Many):
            self.calls += [r for r in request.requests if isinstance(r, Call)]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> _Spy:
    s = _Spy()
    real = SyncDriver._send

    def _send(self: SyncDriver, request: Any) -> Any:
        s.record(request)
        return real(self, request)

    monkeypatch.setattr(SyncDriver, "_send", _send)
    return s


def test_every_script_call_touches_one_hash_slot(b: Backends, spy: _Spy) -> None:
    """CLUSTER KEYSLOT of every KEYS entry of every script call is the same
    (redis-py's crc16 implementation of it), across every operation."""
    store, inbox, log = b.store, b.inbox, b.log
    m = order_machine()
    plugins = [IdempotencyPlugin(inbox, principal=lambda e: "acct_1"), AuditPlugin(log)]
    for key in ("order:1", "order:2", "x{y}z", "{weird}", "a*b"):
        with persisted(store, key, m, plugins=plugins) as inst:
            inst.send("ADD", idempotency_key="evt_1", actor="alice")
        with persisted(store, key, m, plugins=plugins, idempotency_key="req-9") as inst:
            inst.send("PAY", actor="bob")
        store.open(OpenRequest(key, "tok", 1_000, (claim_req(key=key),)), inbox=inbox)
        store.release_lock(key, "tok")
        c = claim_req("k2", key=key)
        inbox.claim(c)
        inbox.mark(InboxMark(c, {}, 1_000))
        inbox.release(InboxRelease(claim_req("k3", key=key)))
        store.record_timer_failure(
            key, expected_version=2, failures={"e": TimerFailure(1, 0)}, next_due_ms=7
        )
        log.append_next(key, entry(), version=2)
    store.save("s", snap(), expected_version=0)
    store.due_keys(10)
    list(store.list_keys())
    store.list_page(machine="order")
    store.list_page(state="order.paid")
    store.dead_letters()
    store.prune_expired()
    inbox.purge_expired()
    inbox.forget("acct")
    log.purge_older_than(2_000_000_000)
    store.delete("order:1")
    store.forget("order:2")
    store.acquire_lock("s", "t", 1_000)
    store.release_lock("s", "t")
    assert {c.script for c in spy.calls} >= {
        "SCHEMA",
        "OPEN",
        "COMMIT",
        "CLAIM",
        "MARK",
        "RELEASE",
        "RECORD_TIMER_FAILURE",
        "LOG_APPEND",
        "DUE",
        "LIST_PAGE",
        "PRUNE_EXPIRED",
        "PURGE_INBOX",
        "FORGET_SCOPE",
        "LOG_PURGE",
        "DELETE",
        "FORGET",
        "ACQUIRE_LOCK",
        "RELEASE_LOCK",
    }
    for call in spy.calls:
        slots = {key_slot(k.encode()) for k in call.keys}
        assert len(slots) == 1, (call.script, call.keys)


def test_claims_for_another_instance_are_refused_not_sent_across_slots(b: Backends) -> None:
    other = claim_req(key="order:2")
    with pytest.raises(InvalidConfigError):
        b.store.open(OpenRequest("order:1", "", 0, (other,)), inbox=b.inbox)
    with pytest.raises(InvalidConfigError):
        b.store.commit(
            unit("order:1", 0, snap(), marks=(InboxMark(other, {}, 1_000),)),
            inbox=b.inbox,
            log=b.log,
        )
    assert b.store.load("order:1") is None


# --- schema marker -----------------------------------------------------------------


def _schema(b: Backends) -> str:
    return "{" + b.store.prefix + "}:schema"


def test_the_schema_marker_stores_layout_version_and_bucket_count(b: Backends) -> None:
    b.store.load("k")  # construction does no I/O: the first use writes the marker
    marker = b.client.hgetall(_schema(b))
    assert {k: v for k, v in marker.items() if k != b"id"} == {
        b"layout": str(LAYOUT_VERSION).encode(),
        b"buckets": b"4",
    }
    assert len(marker[b"id"]) == 16  # the random namespace id
    # later processes read the count from the marker
    again = RedisStore(b.client, prefix=b.store.prefix)
    assert layout_of(again).buckets == 4
    inbox = RedisInbox(b.client, prefix=b.store.prefix)
    inbox.claim(claim_req())
    assert inbox.core.state.layout == KeyLayout(b.store.prefix, 4)


def test_a_newer_layout_is_refused_with_store_error(b: Backends) -> None:
    b.store.load("k")
    b.client.hset(_schema(b), "layout", LAYOUT_VERSION + 1)
    with pytest.raises(StoreError, match="layout") as err:
        RedisStore(b.client, prefix=b.store.prefix).load("k")
    assert "upgrade" in str(err.value)
    with pytest.raises(StoreError, match="layout"):
        RedisLog(b.client, prefix=b.store.prefix).read("k")


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda c, k: c.hset(k, "layout", "one"), id="non-numeric-layout"),
        pytest.param(lambda c, k: c.hdel(k, "buckets"), id="missing-buckets"),
        pytest.param(lambda c, k: c.hset(k, "buckets", 0), id="zero-buckets"),
        pytest.param(lambda c, k: c.hset(k, "buckets", 99_999), id="too-many-buckets"),
        pytest.param(lambda c, k: c.hset(k, "layout", 0), id="layout-zero"),
        pytest.param(lambda c, k: (c.delete(k), c.set(k, "v1")), id="wrong-type-string"),
        pytest.param(lambda c, k: (c.delete(k), c.rpush(k, "v1")), id="wrong-type-list"),
    ],
)
def test_an_unreadable_marker_is_store_error_at_first_use(b: Backends, damage: Any) -> None:
    b.store.load("k")
    damage(b.client, _schema(b))
    store = RedisStore(b.client, prefix=b.store.prefix)  # no I/O yet
    with pytest.raises(StoreError, match="schema marker") as err:
        store.load("k")
    assert not isinstance(err.value, SnapshotCorruptError)
    assert store.health()["ok"] is False


def test_a_different_explicit_bucket_count_is_refused(b: Backends) -> None:
    b.store.load("k")
    with pytest.raises(StoreError, match="4 buckets"):
        RedisStore(b.client, prefix=b.store.prefix, buckets=8).load("k")
    with pytest.raises(StoreError, match="4 buckets"):
        RedisInbox(b.client, prefix=b.store.prefix, buckets=16).claim(claim_req())
    assert layout_of(RedisStore(b.client, prefix=b.store.prefix, buckets=4)).buckets == 4


@pytest.mark.parametrize("buckets", [0, -1, 1025, True, 2.0, "4"])
def test_a_bad_bucket_count_is_invalid_config(buckets: Any) -> None:
    with pytest.raises(InvalidConfigError):
        KeyLayout("p", buckets)


# --- prefixes and globs ---------------------------------------------------------------

BAD_PREFIXES = ["", None, 42, "a{b", "a}b", "{a}", "a*", "a?", "a[1]", "a\\b", "a b", "é", "x" * 65]


@pytest.mark.parametrize("prefix", BAD_PREFIXES)
def test_prefixes_are_validated_everywhere(prefix: Any) -> None:
    import fakeredis
    import fakeredis.aioredis

    client = fakeredis.FakeRedis()
    for build in (
        lambda: RedisStore(client, prefix=prefix),
        lambda: RedisInbox(client, prefix=prefix),
        lambda: RedisLog(client, prefix=prefix),
        lambda: AsyncRedisStore(fakeredis.aioredis.FakeRedis(), prefix=prefix),
    ):
        with pytest.raises(InvalidConfigError) as err:
            build()
        assert err.value.path == "prefix"


def test_a_prefix_is_required() -> None:
    import fakeredis

    with pytest.raises(TypeError):
        RedisStore(fakeredis.FakeRedis())  # type: ignore[call-arg]


def test_escape_glob_escapes_every_metacharacter() -> None:
    assert escape_glob("plain:key-1") == "plain:key-1"
    assert escape_glob("a*b?c[d]e\\f") == "a\\*b\\?c\\[d\\]e\\\\f"


def test_escape_glob_matches_literally_on_the_server(b: Backends) -> None:
    base = "{" + unique_prefix() + "}:"
    names = ["a*1", "a*2", "ab", "a?c", "a[1]", "a]", "a\\x", "a\\\\", "b"]
    try:
        for n in names:
            b.client.set(base + n, 1)
        for literal, expected in [
            ("a*", ["a*1", "a*2"]),
            ("a?", ["a?c"]),
            ("a[", ["a[1]"]),
            ("a]", ["a]"]),
            ("a\\", ["a\\x", "a\\\\"]),
        ]:
            pattern = escape_glob(base + literal) + "*"
            found = sorted(k.decode()[len(base) :] for k in b.client.scan_iter(match=pattern))
            assert found == sorted(expected), literal
    finally:
        b.client.delete(*(base + n for n in names))


def test_list_keys_with_every_glob_character_in_prefixes(b: Backends) -> None:
    keys = ["a*1", "a*2", "ab", "a?c", "a[1]", "a]", "a]]", "a\\x", "a\\\\", "b", "a"]
    for k in keys:
        b.store.save(k, snap(), expected_version=0)
    for prefix in ("a*", "a?", "a[", "a]", "a\\", "a\\\\", "*", "?", "[", "\\", "a"):
        assert list(b.store.list_keys(prefix)) == sorted(k for k in keys if k.startswith(prefix))
        page, _ = b.store.list_page(prefix, machine="order")
        assert page == sorted(k for k in keys if k.startswith(prefix))[:50]
    assert list(b.store.list_keys()) == sorted(keys)
