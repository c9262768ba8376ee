"""The asyncio twins (AsyncRedisStore, AsyncRedisInbox, AsyncRedisLog) give
the same results as the sync classes for the same operations, and share a
namespace with them on the same server (write sync, read async, and back).
Runs on ``fakeredis.aioredis`` (same FakeServer as the sync client) and on
live ``redis.asyncio``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from django_xsm.exceptions import ConflictError
from django_xsm.persistence import apersisted
from django_xsm.persistence.records import (
    ClaimRequest,
    InboxMark,
    InboxRelease,
    OpenRequest,
    TimerFailure,
)
from django_xsm.redis import (
    AsyncRedisInbox,
    AsyncRedisLog,
    AsyncRedisStore,
    RedisInbox,
    RedisLog,
    RedisStore,
)
from tests.redis.helpers import entry, norm, snap, unit
from tests.support import LIVE_URL, delete_namespace, order_machine, unique_prefix

FLAVOURS = ["fakeredis", pytest.param("live", marks=pytest.mark.live)]


@dataclass
class Twins:
    sync_client: Any
    async_client: Any

    def sync(self, prefix: str) -> tuple[Any, Any, Any]:
        c = self.sync_client
        return (
            RedisStore(c, prefix=prefix, buckets=4),
            RedisInbox(c, prefix=prefix, buckets=4),
            RedisLog(c, prefix=prefix, buckets=4),
        )

    def aio(self, prefix: str) -> tuple[Any, Any, Any]:
        c = self.async_client
        return (
            AsyncRedisStore(c, prefix=prefix, buckets=4),
            AsyncRedisInbox(c, prefix=prefix, buckets=4),
            AsyncRedisLog(c, prefix=prefix, buckets=4),
        )


@pytest.fixture(params=FLAVOURS)
async def twins(request: pytest.FixtureRequest) -> AsyncIterator[Twins]:
    if request.param == "fakeredis":
        import fakeredis
        import fakeredis.aioredis

        server = fakeredis.FakeServer()
        yield Twins(fakeredis.FakeRedis(server=server), fakeredis.aioredis.FakeRedis(server=server))
        return
    if not LIVE_URL:
        pytest.skip("XSM_REDIS_URL is not set")
    import redis
    import redis.asyncio

    t = Twins(redis.Redis.from_url(LIVE_URL), redis.asyncio.Redis.from_url(LIVE_URL))
    yield t
    await t.async_client.aclose()


@pytest.fixture
def prefixes(twins: Twins) -> Any:
    made: list[str] = []

    def new() -> str:
        made.append(unique_prefix())
        return made[-1]

    yield new
    for p in made:
        delete_namespace(twins.sync_client, p)


async def resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        value = await value
    if hasattr(value, "__aiter__"):
        value = [x async for x in value]
    elif inspect.isgenerator(value) or type(value).__name__ == "generator":
        value = list(value)
    return value


async def aoutcome(thunk: Any) -> Any:
    try:
        return ("ok", await resolve(thunk()))
    except ConflictError as exc:
        return ("raise", "ConflictError", exc.actual, exc.reason)
    except Exception as exc:
        return ("raise", type(exc).__name__)


def claim_req(idem: str = "k1", owner: str = "w", key: str = "order:1") -> ClaimRequest:
    return ClaimRequest("acct", key, idem, "fp", owner, 60_000)


def full_unit(expected: int, idem: str, **kw: Any) -> Any:
    return unit(
        "order:1",
        expected,
        snap(items=expected + 1),
        commit_id=f"c-{idem}-{expected}",
        state_ids=("order", "order.cart"),
        next_due_ms=1_000 + expected,
        marks=(InboxMark(claim_req(idem), {"idem": idem}, 60_000),),
        log_entries=(entry(f"E{expected}", ts=5_000),),
        **kw,
    )


# (object, method, args, kwargs); store/inbox/log are filled in per twin
SCRIPT: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = [
    ("store", "load", ("order:1",), {}),
    ("store", "save", ("order:1", snap()), {"expected_version": 0}),
    ("store", "save", ("order:1", snap()), {"expected_version": 0}),
    ("inbox", "claim", (claim_req("a"),), {}),
    ("inbox", "claim", (claim_req("a", owner="other"),), {}),
    ("store", "commit", (full_unit(1, "a"),), {"with": True}),
    ("store", "commit", (full_unit(1, "a"),), {"with": True}),  # a retry
    ("store", "commit", (full_unit(1, "b"),), {"with": True}),  # stale
    ("store", "open", (OpenRequest("order:1", "tok", 60_000, (claim_req("c"),)),), {"inbox": 1}),
    ("store", "open", (OpenRequest("order:1", "tok2", 60_000),), {}),
    ("store", "lock_holder", ("order:1",), {}),
    ("store", "commit", (full_unit(2, "c", lock_token="tok", release_lock=True),), {"with": True}),
    ("store", "acquire_lock", ("order:1", "t1", 60_000), {}),
    ("store", "acquire_lock", ("order:1", "t2", 60_000), {"post": lambda ms: ms > 0}),
    ("store", "release_lock", ("order:1", "t2"), {}),
    ("store", "release_lock", ("order:1", "t1"), {}),
    (
        "store",
        "record_timer_failure",
        ("order:1",),
        {
            "expected_version": 3,
            "failures": {"e": TimerFailure(2, 0, dead=True)},
            "next_due_ms": 1_500,
        },
    ),
    ("store", "dead_letters", (), {"post": lambda rows: [k for k, _ in rows]}),
    ("store", "load", ("order:1",), {}),
    ("store", "save", ("order:2", snap()), {"expected_version": 0}),
    ("store", "list_page", (), {"limit": 1}),
    ("store", "list_page", ("order:",), {"after": "order:1", "state": "order.cart"}),
    ("store", "list_keys", ("order",), {}),
    ("store", "due_keys", (2,), {"limit": 5}),
    ("store", "prune_expired", (), {}),
    ("inbox", "mark", (InboxMark(claim_req("z"), {"z": 1}, 60_000),), {}),
    ("inbox", "release", (InboxRelease(claim_req("z")),), {}),
    ("inbox", "get", ("acct", "order:1", "a"), {}),
    ("inbox", "purge_expired", (), {}),
    ("inbox", "purge_expired", (), {"limit": None, "batch": 2}),
    ("inbox", "count_expired", (), {}),
    ("store", "machine_ids", (["order:1", "order:2", "order:none"],), {}),
    ("log", "append_next", ("order:9", entry("X", ts=1)), {"version": 7}),
    ("log", "append", (entry("Y", ts=2).to_record("order:9", 5, 7),), {}),
    ("log", "read", ("order:1",), {"after_seq": 1, "limit": 5}),
    ("log", "read_last", ("order:9",), {"count": 1}),
    ("log", "last_seq", ("order:9",), {}),
    ("log", "bucket_count", (), {}),
    ("log", "streams_older_than", (0.0015,), {}),
    ("log", "streams_older_than", (0.0015,), {"bucket": 1}),
    ("log", "count_older_than", (0.0015,), {}),
    ("log", "count_older_than", (0.0015,), {"key": "order:1"}),
    ("log", "purge_older_than", (0.0015,), {}),
    ("log", "forget", ("order:9",), {}),
    ("store", "delete", ("order:2",), {}),
    ("store", "forget", ("order:1",), {}),
    ("inbox", "count_for_instance", ("order:1",), {}),
    ("inbox", "forget_instance", ("order:1",), {}),
    ("inbox", "count_for_instance", ("order:1",), {}),
    ("inbox", "forget", ("acct",), {}),
    ("store", "load", ("order:1",), {}),
]


async def run_script(store: Any, inbox: Any, log: Any) -> list[Any]:
    objects = {"store": store, "inbox": inbox, "log": log}
    out = []
    for obj, method, args, kwargs in SCRIPT:
        kw = dict(kwargs)
        post = kw.pop("post", lambda value: value)
        if kw.pop("with", False):
            kw.update(inbox=inbox, log=log)
        if kw.pop("inbox", None):
            kw["inbox"] = inbox
        target = getattr(objects[obj], method, None)
        if target is None:
            out.append((obj, method, "missing"))
            continue
        got = await aoutcome(lambda t=target, a=args, k=kw: t(*a, **k))
        if got[0] == "ok":
            got = ("ok", post(got[1]))
        out.append((obj, method, norm(got)))
    return out


async def test_the_async_twins_give_the_same_results_as_the_sync_classes(
    twins: Twins, prefixes: Any
) -> None:
    expected = await run_script(*twins.sync(prefixes()))
    actual = await run_script(*twins.aio(prefixes()))
    assert [x for x in expected if x[2] == "missing"] == []
    for e, a in zip(expected, actual, strict=True):
        assert a == e


async def test_sync_and_async_objects_share_a_namespace(twins: Twins, prefixes: Any) -> None:
    prefix = prefixes()
    s_store, s_inbox, s_log = twins.sync(prefix)
    a_store, a_inbox, a_log = twins.aio(prefix)
    assert a_store.shares_commit(a_inbox) and a_store.shares_commit(a_log)
    assert not s_store.shares_commit(a_inbox)  # a sync store cannot run async marks

    # written sync, read async
    s_inbox.claim(claim_req("s"))
    s_store.commit(full_unit(0, "s"), inbox=s_inbox, log=s_log)
    rec = await a_store.load("order:1")
    assert rec.version == 1 and rec.snapshot["context"]["items"] == 1
    assert [r.event_type for r in await a_log.read("order:1")] == ["E0"]
    assert (await a_inbox.claim(claim_req("s", owner="x"))).receipt == {"idem": "s"}
    assert await a_store.due_keys(2) == [("order:1", 1_000)]

    # written async, read sync
    await a_inbox.claim(claim_req("a"))
    await a_store.commit(full_unit(1, "a"), inbox=a_inbox, log=a_log)
    assert s_store.load("order:1").version == 2
    assert [r.seq for r in s_log.read("order:1")] == [1, 2]
    assert s_inbox.get("acct", "order:1", "a")["receipt"] == {"idem": "a"}

    # locks and versions fence across the two
    assert await a_store.acquire_lock("order:1", "async", 60_000) == 0
    assert s_store.acquire_lock("order:1", "sync", 60_000) > 0
    with pytest.raises(ConflictError):
        s_store.commit(unit("order:1", 2, snap(items=9)))
    assert await a_store.release_lock("order:1", "async")
    assert s_store.save("order:1", snap(items=3), expected_version=2) == 3
    with pytest.raises(ConflictError):
        await a_store.save("order:1", snap(), expected_version=2)


async def test_apersisted_runs_on_the_async_twins(twins: Twins, prefixes: Any) -> None:
    from django_xsm.persistence import AuditPlugin, IdempotencyPlugin

    prefix = prefixes()
    a_store, a_inbox, a_log = twins.aio(prefix)
    s_store, _, s_log = twins.sync(prefix)
    m = order_machine()
    plugins = [IdempotencyPlugin(a_inbox, principal=lambda e: "acct"), AuditPlugin(a_log)]
    for _ in range(2):
        async with apersisted(a_store, "order:1", m, plugins=plugins) as inst:
            await inst.asend("ADD", idempotency_key="evt", actor="alice")
    assert s_store.load("order:1").snapshot["context"]["items"] == 1
    assert [(r.event_type, r.actor) for r in s_log.read("order:1")] == [("ADD", "alice")]
