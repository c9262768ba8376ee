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
    MemoryStore,
    ReplayedReceipt,
    apersisted,
    persisted,
)
from django_xsm.redis import AsyncRedisInbox, AsyncRedisLog, AsyncRedisStore, RedisStore
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
    store = RedisStore(client, prefix=unique_prefix(), log_maxlen=50)
    assert store.log.maxlen == 50
    with pytest.raises(InvalidConfigError, match="log_maxlen"):
        RedisStore(client, prefix=unique_prefix(), log_maxlen=0)
    with pytest.raises(InvalidConfigError, match="log_maxlen"):
        RedisStore(client, prefix=unique_prefix(), log_maxlen="10")  # type: ignore[arg-type]


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
