"""A store is the whole backend: its ``inbox``, ``log`` and ``outbox`` are
parts of it on its own client, prefix, buckets and codec, and
``IdempotencyPlugin()`` / ``AuditPlugin()`` with no inbox or log use them."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence import (
    AuditPlugin,
    FernetCodec,
    IdempotencyPlugin,
    MemoryInbox,
    MemoryLog,
    MemoryStore,
    ReplayedReceipt,
    apersisted,
    persisted,
)
from django_xsm.persistence.records import ClaimRequest, ClaimStatus, OpenRequest
from django_xsm.redis import (
    AsyncRedisInbox,
    AsyncRedisLog,
    AsyncRedisStore,
    RedisLog,
    RedisStore,
)
from tests.support import BackendFactory, order_machine, unique_prefix

fakeredis = pytest.importorskip("fakeredis")
Fernet = pytest.importorskip("cryptography.fernet").Fernet

M = order_machine()


def test_the_parts_share_the_store_s_commit_and_settings(make: BackendFactory) -> None:
    store = make().store
    for part in (store.inbox, store.log, store.outbox):
        assert part.client is store.client
        assert part.prefix == store.prefix
    assert store.shares_commit(store.inbox) and store.shares_commit(store.log)
    assert store.log.maxlen is None
    if isinstance(store, MemoryStore):  # the in-process classes
        assert isinstance(store.inbox, MemoryInbox) and isinstance(store.log, MemoryLog)


def test_a_block_with_argument_free_plugins_claims_and_logs_in_the_store(
    make: BackendFactory,
) -> None:
    store = make().store
    plugins = [IdempotencyPlugin(), AuditPlugin()]
    with persisted(store, "o:1", M, plugins=plugins, actor="al") as order:
        first = order.send("ADD", n=2, idempotency_key="k1")
    with persisted(store, "o:1", M, plugins=plugins) as order:
        again = order.send("ADD", n=2, idempotency_key="k1")
    assert first.accepted and isinstance(again, ReplayedReceipt)
    record = store.load("o:1")
    assert (record.version, record.snapshot["context"]["items"]) == (1, 2)
    logged = store.log.read("o:1")
    assert [(r.event_type, r.actor, r.idempotency_key) for r in logged] == [("ADD", "al", "k1")]
    assert store.inbox.get("", "o:1", "k1")["state"] == "done"


def test_an_explicit_inbox_or_log_still_must_share_the_commit() -> None:
    store, other = MemoryStore(), MemoryStore()
    with pytest.raises(InvalidConfigError, match="does not commit with the store"):
        with persisted(store, "o:1", M, plugins=[IdempotencyPlugin(MemoryInbox(other))]):
            pass
    with pytest.raises(InvalidConfigError, match="does not commit with the store"):
        with persisted(store, "o:1", M, plugins=[AuditPlugin(other.log)]):
            pass
    assert store.load("o:1") is None


def test_log_maxlen_is_the_log_s_cap_and_is_checked_at_construction() -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    store = RedisStore(client, prefix=unique_prefix(), log_maxlen=10**12)
    assert store.log.maxlen == 10**12
    with persisted(store, "o:1", M, plugins=[AuditPlugin()]) as order:
        order.send("ADD")  # the largest cap still reaches XADD as an integer
    assert [r.event_type for r in store.log.read("o:1")] == ["ADD"]
    for bad in (0, -1, "10", 2.5, True, 10**12 + 1, 2**63):
        with pytest.raises(InvalidConfigError, match="log_maxlen must be an int from 1"):
            RedisStore(client, prefix=unique_prefix(), log_maxlen=bad)
        with pytest.raises(InvalidConfigError, match="maxlen must be an int from 1"):
            RedisLog(client, prefix=unique_prefix(), maxlen=bad)
        with pytest.raises(InvalidConfigError, match="log_maxlen"):
            MemoryStore(log_maxlen=bad)


def test_store_open_without_an_inbox_claims_in_the_store_s(make: BackendFactory) -> None:
    store = make().store
    claim = ClaimRequest("acct", "o:1", "idem", "fp", "w", 5_000)
    opened = store.open(OpenRequest("o:1", claims=(claim,)))
    assert [c.status for c in opened.claims] == [ClaimStatus.CLAIMED]
    assert store.inbox.get("acct", "o:1", "idem")["state"] == "in_flight"


@pytest.mark.parametrize("what", ["inbox", "log"])
def test_a_part_of_the_wrong_kind_is_refused_before_any_write(what: str) -> None:
    store = MemoryStore()
    wrong: list[Any] = [store, store.outbox, store.log if what == "inbox" else store.inbox]
    for other in wrong:
        plugin = IdempotencyPlugin(other) if what == "inbox" else AuditPlugin(other)
        with pytest.raises(InvalidConfigError, match=f"The {what} given") as err:
            persisted(store, "o:1", M, plugins=[plugin])
        assert err.value.path == what
        assert f"use store.{what}" in str(err.value) and "leave it out" in str(err.value)
    assert store.client.dbsize() == 0


async def test_an_asyncio_store_in_a_blocking_block_is_refused_clearly() -> None:
    client: Any = fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer())
    store = AsyncRedisStore(client, prefix=unique_prefix())
    with pytest.raises(InvalidConfigError, match="persisted\\(\\) needs a StateStore") as err:
        persisted(store, "o:1", M)
    assert err.value.path == "store" and "apersisted()" in str(err.value)
    await client.aclose()


def test_the_parts_seal_with_the_store_s_codec() -> None:
    codec = FernetCodec([Fernet.generate_key()])
    store = MemoryStore(codec=codec)
    with persisted(store, "o:1", M, plugins=[IdempotencyPlugin(), AuditPlugin()]) as order:
        order.send("ADD", note="secret-note", idempotency_key="k1")
    raw = b"".join(
        b"".join(v for pair in fields.items() for v in pair)
        for _id, fields in store.client.xrange(store.layout.log("o:1"))
    )
    assert b"secret-note" not in raw
    assert store.log.read("o:1")[0].payload == {"note": "secret-note"}


async def test_the_async_store_s_parts_are_async() -> None:
    client: Any = fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer())
    store = AsyncRedisStore(client, prefix=unique_prefix(), log_maxlen=10)
    assert isinstance(store.inbox, AsyncRedisInbox) and isinstance(store.log, AsyncRedisLog)
    assert store.log.maxlen == 10 and not hasattr(store, "outbox")
    plugins = [IdempotencyPlugin(), AuditPlugin()]
    async with apersisted(store, "o:1", M, plugins=plugins, idempotency_key="b1") as order:
        order.send("ADD")
    async with apersisted(store, "o:1", M, plugins=plugins, idempotency_key="b1") as order:
        assert order.duplicate
    assert [r.event_type for r in await store.log.read("o:1")] == ["ADD"]
    await client.aclose()


class _Wrapped:
    """A store wrapper written to the operations a block runs (no parts,
    no ``open``): a block with no inbox or log does not ask for them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.driver, self.clock = inner.driver, inner.clock
        self.lock_ttl_ms, self.max_snapshot_bytes = inner.lock_ttl_ms, inner.max_snapshot_bytes

    def open_op(self, request: Any) -> Any:
        return (yield from self.inner.open_op(request))

    def commit_op(self, unit: Any, *, log: Any = None) -> Any:
        return (yield from self.inner.commit_op(unit, log=log))

    def release_lock_op(self, key: str, token: str) -> Any:
        return (yield from self.inner.release_lock_op(key, token))


def test_a_block_without_an_inbox_or_log_asks_its_store_for_no_parts() -> None:
    store = MemoryStore()
    with persisted(_Wrapped(store), "o:1", M) as order:
        order.send("ADD")
    assert store.load("o:1").version == 1
