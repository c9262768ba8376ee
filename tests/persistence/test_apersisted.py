"""apersisted(): the asyncio twin, on redis-py's asyncio client (fakeredis
and, when configured, a live server) — same semantics as persisted()."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from django_xsm.exceptions import (
    ArgumentTypeError,
    ConflictError,
    EventNotAcceptedError,
    IdempotencyInFlightError,
    IdempotencyMismatchError,
    InstanceNotFoundError,
    InvalidConfigError,
    LockTimeoutError,
    PayloadTooLargeError,
    XsmError,
)
from django_xsm.persistence import (
    AuditPlugin,
    IdempotencyPlugin,
    MemoryInbox,
    MemoryLog,
    MemoryStore,
    PessimisticLock,
    ReplayedReceipt,
    apersisted,
    aretry_on_conflict,
)
from django_xsm.persistence.records import ClaimRequest, OpenRequest
from django_xsm.redis import AsyncRedisInbox, AsyncRedisLog, AsyncRedisStore
from tests.support import LIVE_URL, delete_namespace, order_machine, snap, unique_prefix, unit

fakeredis = pytest.importorskip("fakeredis")


class Counted:
    def __init__(self) -> None:
        self.runs = 0

        def add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
            self.runs += 1
            ctx["items"] += int(event.get("n", 1))

        self.machine = order_machine(actions={"add": add})


@dataclass
class AsyncBackends:
    store: AsyncRedisStore
    inbox: AsyncRedisInbox
    log: AsyncRedisLog

    def plugins(self, **kw: Any) -> list[Any]:
        return [IdempotencyPlugin(self.inbox, **kw), AuditPlugin(self.log)]


@pytest.fixture(params=["fakeredis", pytest.param("live", marks=pytest.mark.live)])
async def ab(request: pytest.FixtureRequest) -> AsyncIterator[AsyncBackends]:
    prefix = unique_prefix()
    if request.param == "fakeredis":
        client = fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        if not LIVE_URL:
            pytest.skip("XSM_REDIS_URL is not set")
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(LIVE_URL)
    try:
        yield AsyncBackends(
            AsyncRedisStore(client, prefix=prefix, buckets=4),
            AsyncRedisInbox(client, prefix=prefix),
            AsyncRedisLog(client, prefix=prefix),
        )
    finally:
        if request.param == "live":
            import redis

            sync = redis.Redis.from_url(LIVE_URL)
            delete_namespace(sync, prefix)
            sync.close()
        await client.aclose()


async def test_a_block_commits_once_at_exit_and_audits(ab: AsyncBackends) -> None:
    c = Counted()
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins(), actor="al") as order:
        order.send("ADD")
        await order.asend("ADD", n=2, reason="bulk")
        assert await ab.store.load("o:1") is None
    record = await ab.store.load("o:1")
    assert (record.version, record.snapshot["context"]) == (1, {"items": 3})
    logged = await ab.log.read("o:1")
    assert [(r.seq, r.version, r.actor, r.reason) for r in logged] == [
        (1, 1, "al", ""), (2, 1, "al", "bulk"),
    ]  # fmt: skip


async def test_reads_refusals_and_duplicates_write_nothing(ab: AsyncBackends) -> None:
    c = Counted()
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as order:
        await order.asend("ADD", idempotency_key="evt-1")
    before = await ab.store.load("o:1")
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as order:
        assert order.value == "cart"
        assert not order.send("SHIP").accepted
        again = await order.asend("ADD", idempotency_key="evt-1")
        assert isinstance(again, ReplayedReceipt) and again.duplicate
    after = await ab.store.load("o:1")
    assert (after.version, after.updated_ms) == (before.version, before.updated_ms)
    assert c.runs == 1 and len(await ab.log.read("o:1")) == 1


async def test_a_keyed_send_needs_asend_and_says_so(ab: AsyncBackends) -> None:
    c = Counted()
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as order:
        with pytest.raises(XsmError, match="asend"):
            order.send("ADD", idempotency_key="evt-1")
        await order.asend("ADD")
    assert c.runs == 1 and (await ab.store.load("o:1")).snapshot["context"] == {"items": 1}


async def test_idempotency_in_flight_and_mismatch(ab: AsyncBackends) -> None:
    c = Counted()
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as first:
        await first.asend("ADD", n=1, idempotency_key="evt-1")
        with pytest.raises(IdempotencyInFlightError) as err:
            async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as second:
                await second.asend("ADD", n=1, idempotency_key="evt-1")
        assert err.value.retry_after_s >= 1
    with pytest.raises(IdempotencyMismatchError):
        async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as order:
            await order.asend("ADD", n=2, idempotency_key="evt-1")
    assert c.runs == 1


async def test_a_key_given_at_open_replays_the_block_result(ab: AsyncBackends) -> None:
    c = Counted()
    kw: dict[str, Any] = {"idempotency_key": "req-1", "fingerprint": "f", "principal": "acct"}
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins(), **kw) as order:
        order.send("ADD")
        order.set_result({"status": 201})
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins(), **kw) as order:
        assert order.duplicate and order.replayed_result == {"status": 201}
        assert order.send("ADD").duplicate
    assert c.runs == 1 and (await ab.store.load("o:1")).version == 1


async def test_an_exception_writes_nothing_and_frees_lock_and_claims(ab: AsyncBackends) -> None:
    c = Counted()
    lock = PessimisticLock(timeout=0)
    with pytest.raises(RuntimeError):
        async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins(), lock=lock) as o:
            await o.asend("ADD", idempotency_key="evt-1")
            raise RuntimeError("boom")
    assert await ab.store.load("o:1") is None
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins(), lock=lock) as o:
        assert not isinstance(await o.asend("ADD", idempotency_key="evt-1"), ReplayedReceipt)
    assert (await ab.store.load("o:1")).version == 1
    with pytest.raises(XsmError):
        o.send("ADD")  # unusable after exit


async def test_strict_and_create_false(ab: AsyncBackends) -> None:
    c = Counted()
    with pytest.raises(InstanceNotFoundError):
        async with apersisted(ab.store, "o:1", c.machine, create=False):
            pass
    with pytest.raises(EventNotAcceptedError):
        async with apersisted(ab.store, "o:1", c.machine, strict=True) as order:
            order.send("ADD")
            order.send("SHIP")
    assert await ab.store.load("o:1") is None


async def test_locks_conflict_and_contention(ab: AsyncBackends) -> None:
    c = Counted()
    async with apersisted(ab.store, "o:1", c.machine) as order:
        order.send("ADD")
    with pytest.raises(ConflictError):
        async with apersisted(ab.store, "o:1", c.machine) as slow:
            slow.send("ADD")
            async with apersisted(ab.store, "o:1", c.machine) as fast:
                fast.send("ADD")
    async with apersisted(ab.store, "o:1", c.machine, lock=PessimisticLock()) as holder:
        with pytest.raises(LockTimeoutError):
            async with apersisted(ab.store, "o:1", c.machine, lock=PessimisticLock(timeout=0.05)):
                pass
        holder.send("PAY")
    assert (await ab.store.load("o:1")).snapshot["value"] == "paid"


async def test_concurrent_tasks_lose_no_update(ab: AsyncBackends) -> None:
    c = Counted()
    async with apersisted(ab.store, "o:1", c.machine) as order:
        order.send("ADD", n=0)

    async def one() -> None:
        async with apersisted(ab.store, "o:1", c.machine) as o:
            await asyncio.sleep(0)  # let the other tasks interleave
            o.send("ADD")

    async def worker() -> None:
        for _ in range(10):
            await aretry_on_conflict(one, attempts=100, base_s=0.001, max_s=0.01)

    await asyncio.gather(*(worker() for _ in range(5)))
    assert (await ab.store.load("o:1")).snapshot["context"] == {"items": 50}


async def test_sync_backends_are_refused_before_any_io(ab: AsyncBackends) -> None:
    m = order_machine()
    with pytest.raises(InvalidConfigError, match="AsyncStateStore"):
        apersisted(MemoryStore(), "o:1", m)
    with pytest.raises(InvalidConfigError, match="async inbox"):
        apersisted(ab.store, "o:1", m, plugins=[IdempotencyPlugin(MemoryInbox())])
    # a log is written by the store's own commit: one that is not its own is refused
    with pytest.raises(InvalidConfigError, match="does not commit with the store"):
        apersisted(ab.store, "o:1", m, plugins=[AuditPlugin(MemoryLog())])
    assert await ab.store.load("o:1") is None


async def test_the_async_stores_open_and_commit_refuse_what_does_not_share_the_commit(
    ab: AsyncBackends,
) -> None:
    claims = (ClaimRequest("acct", "o:1", "idem", "fp", "w", 5_000),)
    with pytest.raises(InvalidConfigError, match="does not commit with the store"):
        await ab.store.open(OpenRequest("o:1", claims=claims), inbox=MemoryInbox())
    for other in ({"inbox": MemoryInbox()}, {"log": MemoryLog()}):
        with pytest.raises(InvalidConfigError, match="does not commit with the store"):
            await ab.store.commit(unit("o:1", 0, snap(items=1)), **other)
    assert await ab.store.load("o:1") is None


async def test_bad_audit_metadata_is_refused_before_any_write(ab: AsyncBackends) -> None:
    """The async twin of tests/persistence/test_argument_types.py."""
    c = Counted()
    with pytest.raises(ArgumentTypeError):
        async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins(), actor=None):
            pytest.fail("the block must not open")
    with pytest.raises(ArgumentTypeError) as err:
        async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as order:
            await order.asend("ADD", idempotency_key="evt-1", actor=["mallory"])
    assert err.value.path == "actor"
    with pytest.raises(ArgumentTypeError):
        async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as order:
            order.send("ADD", reason=None)
    assert await ab.store.load("o:1") is None and await ab.log.read("o:1") == []
    assert c.runs == 0


async def test_a_payload_over_max_payload_bytes_is_refused_before_its_claim(
    ab: AsyncBackends,
) -> None:
    c = Counted()
    async with apersisted(
        ab.store, "o:1", c.machine, plugins=ab.plugins(), max_payload_bytes=20
    ) as order:
        with pytest.raises(PayloadTooLargeError) as err:
            await order.asend("ADD", idempotency_key="evt-1", note="x" * 20)
        assert (err.value.size, err.value.limit) == (31, 20)
        with pytest.raises(PayloadTooLargeError):
            order.send("ADD", note="x" * 20)
    assert await ab.store.load("o:1") is None and c.runs == 0
    async with apersisted(ab.store, "o:1", c.machine, plugins=ab.plugins()) as order:
        assert (await order.asend("ADD", idempotency_key="evt-1")).accepted  # never claimed
