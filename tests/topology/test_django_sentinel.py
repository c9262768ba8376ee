"""The Django layer on a real Sentinel-managed primary (a primary, a replica,
three sentinels): ``XSM['SENTINEL']`` with ``DURABILITY``, the manager,
sync and async views with idempotency keys, the timer scanner, the admin,
readiness, a django-redis ``SentinelClient`` cache alias (and its asyncio
twin), and a failover in the middle of a stream of sends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis.asyncio.sentinel
import redis.sentinel
from django.conf import settings
from django.test import AsyncClient, Client, override_settings

from django_xsm import backend as stores
from django_xsm.checks import check_deploy
from django_xsm.exceptions import (
    IdempotencyInFlightError,
    NotDurableError,
    StoreUnavailableError,
)
from django_xsm.redis import KeyLayout
from django_xsm.registry import machines
from tests.topology import django_steps
from tests.topology.servers import SentinelSet, admin, close_sentinels, needs_topology

pytestmark = [needs_topology, pytest.mark.fault]

MACHINES = {
    "ticket": "tests.django.machines.ticket",
    "alarm": "tests.django.commands.machines.alarm",
}
IDEM = {"headers": {"Idempotency-Key": "pay-once"}}
DESCRIPTION = "sentinel 'mymaster' (XSM['SENTINEL'])"


def xsm_for(topology: SentinelSet, **changes: Any) -> dict[str, Any]:
    return {
        "SENTINEL": {"HOSTS": topology.sentinel_hosts, "SERVICE": topology.service},
        "DURABILITY": {"MIN_REPLICAS": 1, "TIMEOUT_MS": 1000},
        "PREFIX": "topo",
        "MACHINES": MACHINES,
        "SOCKET_TIMEOUT_S": 2.0,
        **changes,
    }


@contextmanager
def xsm_settings(value: dict[str, Any], **django: Any) -> Iterator[None]:
    """XSM (and other settings) for a block; the sync client built meanwhile
    is closed at its end, with the connections to its sentinels."""
    with override_settings(XSM=value, **django):
        try:
            yield
        finally:
            found = stores.build._backend
            if found is not None:
                found.client.close()
                close_sentinels(found.client.connection_pool.sentinel_manager)


@pytest.fixture
def on_sentinel(
    sentinel_set: SentinelSet, sentinel: redis.sentinel.Sentinel
) -> Iterator[SentinelSet]:
    """XSM on the settled, flushed set, every commit acknowledged by the replica."""
    with xsm_settings(xsm_for(sentinel_set)):
        yield sentinel_set


def on_replica(topology: SentinelSet, key: str) -> bool:
    snapshot = KeyLayout("topo", 16).snapshot(key)
    return bool(admin(topology.replica, "EXISTS", snapshot))


# --- the quick start --------------------------------------------------------------------


def test_the_manager_commits_to_the_primary_and_its_replica(on_sentinel: SentinelSet) -> None:
    found = stores.get_backend()
    assert (found.source, found.description) == ("sentinel", DESCRIPTION)
    assert found.store.min_replicas == 1 and found.store.replica_timeout_ms == 1000
    objects = machines["ticket"].objects
    objects.send("ticket:1", "BUMP", create=True)
    objects.send("ticket:1", "BUMP")
    view = objects.get("ticket:1")
    assert (view.context["count"], view.version) == (2, 2)
    # DURABILITY: acknowledged only once the replica had it
    assert on_replica(on_sentinel, "ticket:1")


async def test_the_async_manager_on_the_sentinel_primary(on_sentinel: SentinelSet) -> None:
    objects = machines["ticket"].objects
    async with objects.aopen("ticket:a") as block:
        block.send("BUMP")
    found = stores.get_async_backend()
    assert found.description == DESCRIPTION
    assert isinstance(found.client.connection_pool, redis.asyncio.sentinel.SentinelConnectionPool)
    assert (await objects.aget("ticket:a")).version == 1
    assert on_replica(on_sentinel, "ticket:a")


def test_sync_view_replays_an_idempotent_request(on_sentinel: SentinelSet) -> None:
    client = Client()
    first = client.post("/t/s1/bump", **IDEM)
    assert first.status_code == 201 and first.json()["count"] == 1
    again = client.post("/t/s1/bump", **IDEM)
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert machines["ticket"].objects.get("ticket:s1").version == 1


async def test_async_view_replays_an_idempotent_request(on_sentinel: SentinelSet) -> None:
    client = AsyncClient()
    first = await client.post("/t/s2/abump", **IDEM)
    assert first.status_code == 201 and first.json()["count"] == 1
    again = await client.post("/t/s2/abump", **IDEM)
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert (await machines["ticket"].objects.aget("ticket:s2")).version == 1


def test_the_scanner_fires_a_due_timer(on_sentinel: SentinelSet) -> None:
    django_steps.scanner_fires_a_due_timer()


def test_the_admin_lists_the_instances(on_sentinel: SentinelSet, admin_client: Client) -> None:
    django_steps.admin_lists_the_instances(admin_client)


def test_the_live_stream_reads_each_key_on_its_own_node(on_sentinel: SentinelSet, db: None) -> None:
    # db: a stream that closes fires request_finished, which closes database connections
    django_steps.streams_follow_commits_on_every_key()


def test_readiness_names_the_service(on_sentinel: SentinelSet) -> None:
    ready = Client().get("/_xsm/ready")
    assert ready.status_code == 200, ready.content
    assert ready.json()["store"] == DESCRIPTION
    assert str(on_sentinel.primary.port) not in ready.content.decode()


# --- CACHE_ALIAS: django-redis's SentinelClient --------------------------------------------


@pytest.fixture
def sentinel_cache(sentinel_set: SentinelSet, sentinel: Any) -> Iterator[SentinelSet]:
    from django_redis.pool import ConnectionFactory

    cache = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{sentinel_set.service}/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
            "SENTINELS": sentinel_set.sentinel_hosts,
            "SENTINEL_KWARGS": {"socket_timeout": 2, "socket_connect_timeout": 2},
            "SOCKET_TIMEOUT": 2,
            "SOCKET_CONNECT_TIMEOUT": 2,
        },
    }
    value = xsm_for(sentinel_set, SENTINEL=None, CACHE_ALIAS="xsm")
    try:
        with xsm_settings(value, CACHES={**settings.CACHES, "xsm": cache}):
            yield sentinel_set
    finally:
        ConnectionFactory._pools.clear()  # django-redis keeps pools per process


def test_cache_alias_with_django_redis_sentinel_client(sentinel_cache: SentinelSet) -> None:
    found = stores.get_backend()
    assert found.source == "cache"
    assert found.description == "sentinel 'mymaster' (cache 'xsm')"
    machines["ticket"].objects.send("ticket:c", "BUMP", create=True)
    assert machines["ticket"].objects.get("ticket:c").version == 1
    assert on_replica(sentinel_cache, "ticket:c")


def test_cache_alias_async_twin_asks_the_same_sentinels(sentinel_cache: SentinelSet) -> None:
    async def run() -> tuple[Any, int]:
        async with machines["ticket"].objects.aopen("ticket:ac") as block:
            block.send("BUMP")
        found = stores.get_async_backend()
        return found, (await machines["ticket"].objects.aget("ticket:ac")).version

    found, version = asyncio.run(run())
    assert version == 1
    pool = found.client.connection_pool
    assert isinstance(pool, redis.asyncio.sentinel.SentinelConnectionPool)
    assert pool.service_name == "mymaster"
    asked = [
        (c.connection_pool.connection_kwargs["host"], c.connection_pool.connection_kwargs["port"])
        for c in pool.sentinel_manager.sentinels
    ]
    assert sorted(asked) == sorted(sentinel_cache.sentinel_hosts)
    assert "host" not in pool.connection_kwargs  # not the service name as an address
    assert machines["ticket"].objects.get("ticket:ac").context["count"] == 1
    # the loop's end closed the primary's connections and the sentinels' too
    opened = [
        c
        for p in (pool, *(s.connection_pool for s in pool.sentinel_manager.sentinels))
        for c in (*p._available_connections, *p._in_use_connections)
    ]
    assert opened and not any(c.is_connected for c in opened)


def test_deploy_checks_on_the_sentinel_primary(on_sentinel: SentinelSet) -> None:
    found = {m.id for m in check_deploy()}
    assert found <= {"xsm.W012"}  # no cluster node, no bucket spread to warn about


# --- a failover while sends go on ----------------------------------------------------------

#: How long one send may keep failing while the set fails over.
RETRY_WINDOW_S = 45.0
#: What a send meets while the primary moves; every other error fails the test.
TRANSIENT = (StoreUnavailableError, NotDurableError, IdempotencyInFlightError)


def send_until_done(key: str, op: str, failures: list[str]) -> None:
    """One idempotent send, retried with the same idempotency key until it
    is acknowledged (a retry of a commit that did land replays it)."""
    deadline = time.monotonic() + RETRY_WINDOW_S
    while True:
        try:
            machines["ticket"].objects.send(key, "BUMP", idempotency_key=op, create=True)
            return
        except TRANSIENT as exc:
            failures.append(type(exc).__name__)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_failover_loses_no_update(sentinel_set: SentinelSet, sentinel: Any) -> None:
    # Short leases: a claim stranded on the demoted primary blocks its key briefly.
    value = xsm_for(sentinel_set, LOCK_TTL_MS=2000)
    with xsm_settings(value):
        before = sentinel_set.master_address()
        failures: list[str] = []
        for n in range(20):
            send_until_done("ticket:f", f"op-{n}", failures)
        assert failures == []
        moved = threading.Event()
        trouble: list[BaseException] = []

        def fail_over() -> None:
            try:
                sentinel_set.failover()
            except BaseException as exc:  # reported by the main thread
                trouble.append(exc)
            finally:
                moved.set()

        thread = threading.Thread(target=fail_over)
        thread.start()
        n = 20
        while not moved.is_set():
            send_until_done("ticket:f", f"op-{n}", failures)
            n += 1
        thread.join()
        assert trouble == []
        assert sentinel_set.master_address() != before
        during = list(failures)
        failures.clear()
        for _ in range(20):  # after the switch: every send lands at once
            send_until_done("ticket:f", f"op-{n}", failures)
            n += 1
        assert failures == []
        view = machines["ticket"].objects.get("ticket:f")
        # every acknowledged send counted exactly once, none lost, none twice
        assert view.context["count"] == n
        assert view.version == n
        assert len(machines["ticket"].objects.history("ticket:f")) == n
        assert stores.get_backend().store.health()["ok"]
        assert sentinel_set.primary.port == sentinel_set.master_address()[1]
        assert set(during) <= {e.__name__ for e in TRANSIENT}
        assert on_replica(sentinel_set, "ticket:f")  # the demoted primary follows again
