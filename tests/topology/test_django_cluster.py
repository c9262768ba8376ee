"""The Django layer on a real 3-master Redis Cluster: the settings
(``REDIS_URL`` + ``REDIS_CLUSTER``), the manager, sync and async views with
idempotency keys, the timer scanner, the admin, readiness, the deploy
checks (``xsm.E012``, ``xsm.W013``), ``xsm_namespace`` and a django-redis
cache alias whose client is a cluster client."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis.asyncio.cluster
import redis.cluster
from django.core.cache import caches
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import AsyncClient, Client, override_settings

from django_xsm import backend as stores
from django_xsm.backend.clients import ClusterConnectionFactory
from django_xsm.backend.readiness import namespace_info
from django_xsm.checks import check_deploy
from django_xsm.registry import machines
from tests.topology import django_steps
from tests.topology.servers import RedisCluster3, admin, needs_topology

pytestmark = [needs_topology, pytest.mark.fault]

MACHINES = {
    "ticket": "tests.django.machines.ticket",
    "alarm": "tests.django.commands.machines.alarm",
}
IDEM = {"headers": {"Idempotency-Key": "pay-once"}}


def xsm_for(cluster: RedisCluster3, **changes: Any) -> dict[str, Any]:
    return {
        "REDIS_URL": cluster.seed_url,
        "REDIS_CLUSTER": True,
        "PREFIX": "topo",
        "MACHINES": MACHINES,
        "SOCKET_TIMEOUT_S": 2.0,
        "BUCKETS": 24,
        **changes,
    }


@contextmanager
def xsm_settings(value: dict[str, Any], **django: Any) -> Iterator[None]:
    """XSM (and other settings) for a block; the clients built meanwhile are
    closed at its end (override_settings rebuilds them on the way in and out)."""
    with override_settings(XSM=value, **django):
        try:
            yield
        finally:
            if stores.build._backend is not None:
                stores.build._backend.client.close()


@pytest.fixture
def on_cluster(
    redis_cluster: RedisCluster3, cluster_client: redis.cluster.RedisCluster
) -> Iterator[RedisCluster3]:
    """XSM on the (flushed) cluster: REDIS_URL is its first node."""
    with xsm_settings(xsm_for(redis_cluster)):
        yield redis_cluster


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


def keys_per_master(cluster: RedisCluster3) -> dict[int, int]:
    return {p: int(admin(cluster.server(p), "DBSIZE")) for p in cluster.ports}


# --- the quick start --------------------------------------------------------------------


def test_the_manager_stores_instances_on_every_master(on_cluster: RedisCluster3) -> None:
    found = stores.get_backend()
    assert found.source == "url"
    assert found.description == "redis cluster (XSM['REDIS_URL'])"
    assert isinstance(found.client, redis.cluster.RedisCluster)
    objects = machines["ticket"].objects
    for n in range(40):
        objects.send(f"ticket:{n}", "BUMP", create=True)
        objects.send(f"ticket:{n}", "BUMP")
    view = objects.get("ticket:7")
    assert (view.value, view.context["count"], view.version) == ("open", 2, 2)
    assert sorted(objects.keys("ticket:")) == sorted(f"ticket:{n}" for n in range(40))
    # 24 buckets over 3 masters: every master holds some of the namespace
    assert all(count > 0 for count in keys_per_master(on_cluster).values())
    assert [r.event_type for r in objects.history("ticket:7")] == ["BUMP", "BUMP"]


async def test_the_async_manager_on_the_cluster(on_cluster: RedisCluster3) -> None:
    objects = machines["ticket"].objects
    async with objects.aopen("ticket:a") as block:
        block.send("BUMP")
    found = stores.get_async_backend()
    assert isinstance(found.client, redis.asyncio.cluster.RedisCluster)
    assert found.description == "redis cluster (XSM['REDIS_URL'])"
    view = await objects.aget("ticket:a")
    assert (view.context["count"], view.version) == (1, 1)


def test_sync_view_replays_an_idempotent_request(on_cluster: RedisCluster3) -> None:
    client = Client()
    first = client.post("/t/c1/bump", **IDEM)
    assert first.status_code == 201 and first.json()["count"] == 1
    again = client.post("/t/c1/bump", **IDEM)
    assert again.status_code == 201 and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert machines["ticket"].objects.get("ticket:c1").version == 1


async def test_async_view_replays_an_idempotent_request(on_cluster: RedisCluster3) -> None:
    client = AsyncClient()
    first = await client.post("/t/c2/abump", **IDEM)
    assert first.status_code == 201 and first.json()["count"] == 1
    again = await client.post("/t/c2/abump", **IDEM)
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert (await machines["ticket"].objects.aget("ticket:c2")).version == 1


def test_the_scanner_fires_a_due_timer(on_cluster: RedisCluster3) -> None:
    django_steps.scanner_fires_a_due_timer()


def test_the_admin_lists_the_instances(on_cluster: RedisCluster3, admin_client: Client) -> None:
    django_steps.admin_lists_the_instances(admin_client)


def test_the_live_stream_reads_each_key_on_its_own_node(
    on_cluster: RedisCluster3, db: None
) -> None:
    # db: a stream that closes fires request_finished, which closes database connections
    django_steps.streams_follow_commits_on_every_key()


def test_readiness_needs_every_master_writable(on_cluster: RedisCluster3) -> None:
    ready = Client().get("/_xsm/ready")
    assert ready.status_code == 200, ready.content
    assert ready.json()["store"] == "redis cluster (XSM['REDIS_URL'])"
    # One master refuses writes (it has no replica to satisfy the rule):
    # PING still works there, every bucket it owns does not.
    refusing = on_cluster.server(on_cluster.ports[1])
    admin(refusing, "CONFIG", "SET", "min-replicas-to-write", "1")
    try:
        blocked = Client().get("/_xsm/ready")
        assert blocked.status_code == 503
        assert blocked.json()["reason"] == "store"
    finally:
        admin(refusing, "CONFIG", "SET", "min-replicas-to-write", "0")
    assert Client().get("/_xsm/ready").status_code == 200


# --- deploy checks and the namespace command ---------------------------------------------


def test_e012_a_plain_client_on_a_cluster_node(redis_cluster: RedisCluster3) -> None:
    with xsm_settings(xsm_for(redis_cluster, REDIS_CLUSTER=False)):
        [error] = [m for m in check_deploy() if m.id == "xsm.E012"]
        assert error.msg == "This Redis is a cluster node: set XSM['REDIS_CLUSTER'] = True"
        assert "MOVED" in (error.hint or "")
    with xsm_settings(xsm_for(redis_cluster)):
        assert "xsm.E012" not in ids(check_deploy())


def test_w013_too_few_buckets_for_the_masters(
    redis_cluster: RedisCluster3, cluster_client: redis.cluster.RedisCluster
) -> None:
    with xsm_settings(xsm_for(redis_cluster, BUCKETS=None)):
        [warning] = [m for m in check_deploy() if m.id == "xsm.W013"]
        assert "will be created with 16 buckets for 3 cluster masters" in warning.msg
        assert "XSM['BUCKETS'] = 24" in (warning.hint or "")
        stores.get_store().health()  # the first use creates it with 16
        [warning] = [m for m in check_deploy() if m.id == "xsm.W013"]
        assert "'topo' has 16 buckets for 3 cluster masters" in warning.msg
        assert "xsm_namespace --create --buckets 24" in (warning.hint or "")
        assert "new XSM['PREFIX']" in (warning.hint or "")
    with xsm_settings(xsm_for(redis_cluster, PREFIX="topo24")):
        stores.get_store().health()
        assert "xsm.W013" not in ids(check_deploy())


def test_xsm_namespace_creates_and_shows_the_spread(
    redis_cluster: RedisCluster3, cluster_client: redis.cluster.RedisCluster
) -> None:
    with xsm_settings(xsm_for(redis_cluster, BUCKETS=None)):
        out, err = io.StringIO(), io.StringIO()
        call_command("xsm_namespace", stdout=out, stderr=err)
        assert "not created yet" in out.getvalue()
        assert "16 buckets for 3 cluster masters" in err.getvalue()
        out = io.StringIO()
        call_command("xsm_namespace", "--create", "--buckets", "24", stdout=out)
        text = out.getvalue()
        assert "Created namespace 'topo' with 24 buckets" in text
        assert "masters     3" in text and "password" not in text
        out = io.StringIO()
        call_command("xsm_namespace", "--json", stdout=out)
        data = json.loads(out.getvalue())
        assert data["exists"] and data["cluster"] and data["buckets"] == 24
        assert sorted(data["masters"]) == sorted(f"127.0.0.1:{p}" for p in redis_cluster.ports)
        assert sum(data["spread"].values()) == 24 and data["warning"] is None
        with pytest.raises(CommandError, match="already exists with 24 buckets, not 48"):
            call_command("xsm_namespace", "--create", "--buckets", "48")
        # the stores use what the command created
        machines["ticket"].objects.send("ticket:ns", "BUMP", create=True)
        assert stores.get_store().health()["buckets"] == 24
    info = namespace_info(cluster_client, "topo", None)
    assert info.exists and info.buckets == 24 and len(info.spread) == 3


# --- CACHE_ALIAS: a django-redis cache with a cluster client ------------------------------


@pytest.fixture
def cluster_cache(redis_cluster: RedisCluster3, cluster_client: Any) -> Iterator[RedisCluster3]:
    cache = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": redis_cluster.seed_url,
        "OPTIONS": {
            "CONNECTION_FACTORY": "django_xsm.backend.clients.ClusterConnectionFactory",
            "SOCKET_TIMEOUT": 2,
            "SOCKET_CONNECT_TIMEOUT": 2,
        },
    }
    value = xsm_for(redis_cluster, REDIS_URL=None, REDIS_CLUSTER=False, CACHE_ALIAS="xsm")
    try:
        with xsm_settings(value, CACHES={**_caches(), "xsm": cache}):
            yield redis_cluster
    finally:
        ClusterConnectionFactory.close_all()


def _caches() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.CACHES)


def test_cache_alias_with_a_cluster_client(cluster_cache: RedisCluster3) -> None:
    found = stores.get_backend()
    assert found.source == "cache"
    assert found.description == "redis cluster (cache 'xsm')"
    assert isinstance(found.client, redis.cluster.RedisCluster)
    caches["xsm"].set("greeting", "hello")  # the cache itself works on the cluster
    assert caches["xsm"].get("greeting") == "hello"
    for n in range(10):
        machines["ticket"].objects.send(f"ticket:{n}", "BUMP", create=True)
    assert machines["ticket"].objects.get("ticket:3").context["count"] == 1
    assert "xsm.E012" not in ids(check_deploy())


def test_cache_alias_async_twin_is_a_cluster_client(cluster_cache: RedisCluster3) -> None:
    async def run() -> tuple[Any, int]:
        async with machines["ticket"].objects.aopen("ticket:async") as block:
            block.send("BUMP")
        found = stores.get_async_backend()
        view = await machines["ticket"].objects.aget("ticket:async")
        return found, view.version

    found, version = asyncio.run(run())
    assert version == 1
    assert isinstance(found.client, redis.asyncio.cluster.RedisCluster)
    assert found.description == "redis cluster (cache 'xsm')"
    # the nodes manager's: redis-py 5.0's asyncio client has no startup_nodes of its own
    seeds = {(n.host, n.port) for n in found.client.nodes_manager.startup_nodes.values()}
    assert seeds == {("127.0.0.1", p) for p in cluster_cache.ports}
    assert machines["ticket"].objects.get("ticket:async").context["count"] == 1


def test_e012_for_a_cache_alias_with_a_plain_client(redis_cluster: RedisCluster3) -> None:
    cache = {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": redis_cluster.seed_url,
        "OPTIONS": {"SOCKET_TIMEOUT": 2, "SOCKET_CONNECT_TIMEOUT": 2},
    }
    value = xsm_for(redis_cluster, REDIS_URL=None, REDIS_CLUSTER=False, CACHE_ALIAS="plain")
    with xsm_settings(value, CACHES={**_caches(), "plain": cache}):
        [error] = [m for m in check_deploy() if m.id == "xsm.E012"]
        assert "cache 'plain' must have a cluster client" in error.msg
        assert "ClusterConnectionFactory" in (error.hint or "")
