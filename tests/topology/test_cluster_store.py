"""The Redis layer on a real 3-master Redis Cluster (docs/redis.md, "Topologies").

Blocks, the inbox, the log and the scanner on ``redis.cluster.RedisCluster``
and its asyncio twin: one script per commit (``same_server()`` knows two
cluster clients of one cluster), health that writes every bucket, the
durability WAIT pinned to the key's node, and a live slot migration under
a write loop that loses nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_xsm.exceptions import (
    ConflictError,
    InvalidConfigError,
    NotDurableError,
    StoreUnavailableError,
)
from django_xsm.persistence import (
    AuditPlugin,
    DueTimerScanner,
    IdempotencyPlugin,
    PessimisticLock,
    persisted,
)
from django_xsm.redis import AsyncRedisStore, RedisInbox, RedisLog, RedisStore
from django_xsm.redis.client import same_server
from django_xsm.redis.inbox import AsyncRedisInbox
from django_xsm.redis.log import AsyncRedisLog
from tests.support import order_machine, timer_machine, unique_prefix
from tests.topology.servers import RedisCluster3, needs_topology

pytestmark = [needs_topology, pytest.mark.fault]


@pytest.fixture
def cluster(redis_cluster: RedisCluster3) -> Iterator[RedisCluster3]:
    redis_cluster.wait_healthy()
    redis_cluster.flushall()
    yield redis_cluster


def parts(client: Any, prefix: str, buckets: int = 24) -> tuple[RedisStore, list[Any]]:
    store = RedisStore(client, prefix=prefix, buckets=buckets)
    inbox = RedisInbox(client, prefix=prefix, buckets=buckets)
    log = RedisLog(client, prefix=prefix, buckets=buckets)
    return store, [IdempotencyPlugin(inbox), AuditPlugin(log)]


def add(store: RedisStore, plugins: list[Any], key: str, idem: str | None = None) -> int:
    with persisted(store, key, order_machine(), plugins=plugins) as inst:
        inst.send("ADD", idempotency_key=idem)
        return int(inst.context["items"])


def test_the_quick_start_with_idempotency_and_audit(cluster: RedisCluster3):
    client = cluster.client()
    store, plugins = parts(client, unique_prefix())
    assert add(store, plugins, "order:1", "k1") == 1
    assert add(store, plugins, "order:1", "k1") == 1  # replayed
    assert add(store, plugins, "order:1", "k2") == 2
    assert [r.idempotency_key for r in plugins[1].log.read("order:1")] == ["k1", "k2"]
    keys, _ = store.list_page("order:")
    assert keys == ["order:1"]


def test_pessimistic_waiters_are_woken_on_the_key_s_node(cluster: RedisCluster3):
    # BLPOP on the wake list goes to the node of the key's slot, where the
    # releasing COMMIT pushes: waiters on a hot key take turns, none times out
    client = cluster.client()
    store, plugins = parts(client, unique_prefix())
    add(store, plugins, "order:hot")
    woken: list[bool] = []
    wait = store.wait_unlocked_op

    def spied(key: str, seconds: float) -> Any:
        woken.append((yield from wait(key, seconds)))
        return woken[-1]

    store.wait_unlocked_op = spied  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def worker() -> None:
        for _ in range(5):
            try:
                lock = PessimisticLock(timeout=20)
                with persisted(store, "order:hot", order_machine(), lock=lock) as inst:
                    inst.send("ADD")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    record = store.load("order:hot")
    assert record is not None and record.snapshot["context"]["items"] == 21
    assert True in woken  # some waits were ended by a release, not by their time


def test_two_clients_of_one_cluster_commit_in_one_script(cluster: RedisCluster3):
    a, b = cluster.client(), cluster.client()
    other_seed = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[2])
    assert same_server(a, b) and same_server(a, other_seed)
    prefix = unique_prefix()
    store = RedisStore(a, prefix=prefix)
    assert store.shares_commit(RedisInbox(b, prefix=prefix))
    assert store.shares_commit(RedisLog(other_seed, prefix=prefix))
    assert not same_server(a, cluster.server(cluster.ports[0]).client())


def test_health_writes_every_bucket_and_fails_when_a_master_is_paused(cluster: RedisCluster3):
    # No client retries: the paused master's first timeout is the answer (redis-py 6+
    # retries a cluster command ten times with backoff by default, 50 s here).
    client = cluster.client(
        socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    store = RedisStore(client, prefix=unique_prefix(), buckets=24)
    info = store.health()
    assert info["ok"] and info["buckets"] == 24
    layout = store.layout
    assert layout is not None
    owners = {cluster.node_for_slot(cluster.keyslot(layout.bucket_health(b))) for b in range(24)}
    assert owners == set(cluster.ports)  # 24 buckets reach all three masters
    victim = cluster.masters[1]
    victim.pause()
    try:
        assert store.health()["ok"] is False
    finally:
        victim.resume()
    cluster.wait_healthy()


def test_min_replicas_waits_on_the_keys_own_master(cluster: RedisCluster3):
    # the masters have no replicas: every commit is refused as not durable,
    # which proves the WAIT went to the master that applied the commit
    store = RedisStore(cluster.client(), prefix=unique_prefix(), min_replicas=1,
                       replica_timeout_ms=20)  # fmt: skip
    for n in range(6):  # keys on different masters
        with pytest.raises(NotDurableError) as err:
            with persisted(store, f"order:{n}", order_machine()) as inst:
                inst.send("ADD")
        assert err.value.acknowledged == 0 and err.value.version == 1


def test_a_plain_client_on_a_cluster_node_is_told_to_use_a_cluster_client(
    cluster: RedisCluster3,
):
    plain = cluster.server(cluster.ports[0]).client()
    prefix = unique_prefix()
    store = RedisStore(plain, prefix=prefix, buckets=24)
    with pytest.raises(InvalidConfigError) as err:
        for n in range(30):  # some key's bucket lives on another master
            with persisted(store, f"order:{n}", order_machine()) as inst:
                inst.send("ADD")
    assert "cluster node" in str(err.value) and "RedisCluster" in str(err.value)
    assert "Redis >= 6.2" not in str(err.value)


def test_the_scanner_fires_due_timers_across_masters(cluster: RedisCluster3):
    store = RedisStore(cluster.client(), prefix=unique_prefix(), buckets=24)
    m = timer_machine()
    due = 0
    for n in range(12):
        with persisted(store, f"alarm:{n}", m) as inst:
            inst.send("POKE")  # saved, with its deadline armed
            due = max(due, int(inst.deadlines[0].due_ms))
    result = DueTimerScanner(store, {m.id: m}).scan(now=due + 1)
    assert result.fired == 12 and result.errors == 0
    assert all(store.load(f"alarm:{n}").snapshot["value"] == "expired" for n in range(12))


async def test_the_asyncio_cluster_client_runs_blocks_and_durability(cluster: RedisCluster3):
    from django_xsm.persistence import apersisted

    client = cluster.async_client()
    prefix = unique_prefix()
    store = AsyncRedisStore(client, prefix=prefix, buckets=24)
    inbox = AsyncRedisInbox(client, prefix=prefix, buckets=24)
    plugins = [IdempotencyPlugin(inbox), AuditPlugin(AsyncRedisLog(client, prefix=prefix))]
    try:
        for _ in range(2):
            async with apersisted(store, "order:a", order_machine(), plugins=plugins) as inst:
                await inst.asend("ADD", idempotency_key="once")
        record = await store.load("order:a")
        assert record is not None and record.version == 1
        assert (await store.health())["ok"]
        durable = AsyncRedisStore(client, prefix=prefix, min_replicas=1, replica_timeout_ms=20)
        with pytest.raises(NotDurableError):
            async with apersisted(durable, "order:b", order_machine()) as inst:
                await inst.asend("ADD")
        await durable.aclose()
    finally:
        await store.aclose()


@pytest.mark.timeout(120)
def test_a_slot_migration_under_a_write_loop_loses_nothing(cluster: RedisCluster3):
    client = cluster.client()
    prefix = unique_prefix()
    store, plugins = parts(client, prefix, buckets=24)
    # every key of one bucket: its slot is the one that moves
    layout_keys = [f"order:{n}" for n in range(400)]
    store.health()  # creates the namespace (the schema marker)
    layout = store.layout
    assert layout is not None
    bucket = layout.bucket(layout_keys[0])
    keys = [k for k in layout_keys if layout.bucket(k) == bucket][:8]
    slot = cluster.keyslot(layout.tag(bucket))
    for key in keys:  # data in the slot before it moves
        for i in range(20):
            add(store, plugins, key, f"{key}-seed-{i}")
    acknowledged = dict.fromkeys(keys, 20)
    errors: list[BaseException] = []
    retried: list[str] = []  # 503s and 409s a client would retry
    stop = threading.Event()

    def write_loop() -> None:
        n = 0
        while not stop.is_set():
            key = keys[n % len(keys)]
            in_flight[:] = [n]
            for _attempt in range(50):  # a retrying client, as views retry a 503
                try:
                    add(store, plugins, key, f"{key}-w-{n}")
                except (StoreUnavailableError, ConflictError) as exc:
                    retried.append(repr(exc))
                    continue
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)
                    return
                acknowledged[key] += 1
                in_flight.clear()
                break
            else:
                errors.append(AssertionError(f"write {n} never succeeded: {retried[-2:]}"))
                return
            n += 1

    in_flight: list[int] = []  # the write the loop is in, if any
    overlapped: set[int] = set()  # writes in flight while the slot was split

    def slow_batches(_moved: int) -> None:
        # after each MIGRATE batch the slot is split between two masters:
        # linger there (within redis-py's TRYAGAIN retry budget) so writes
        # meet the split slot
        time.sleep(0.02)
        overlapped.update(in_flight)

    writer = threading.Thread(target=write_loop)
    writer.start()
    try:
        source = cluster.node_for_slot(slot)
        target = next(p for p in cluster.ports if p != source)
        moved = cluster.migrate_slot(slot, target, batch=2, during=slow_batches)
        assert moved >= len(keys)  # snapshots, logs, indexes...
    finally:
        stop.set()
        writer.join(timeout=60)
    for key in keys:  # and more writes once it landed
        add(store, plugins, key, f"{key}-after")
        acknowledged[key] += 1
    assert not errors, errors
    # redis-py follows ASK and TRYAGAIN itself, within a budget of redirections
    # and short sleeps. While the slot is split a multi-key script is answered
    # TRYAGAIN; when the MIGRATE batches outlast that budget (Redis 6.2, an older
    # redis-py, a loaded machine) the write surfaces as a 503 to retry, never as
    # a conflict or another error, and the retry is applied once (counted below)
    assert all("(ClusterError)" in r for r in retried), retried
    assert overlapped  # writes really met the split slot
    assert cluster.node_for_slot(slot) == target
    for key in keys:
        record = store.load(key)
        assert record is not None
        assert record.snapshot["context"]["items"] == acknowledged[key], key
        assert len(plugins[1].log.read(key)) == acknowledged[key]
