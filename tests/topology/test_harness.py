"""The topology harness does what later tests will rely on: a real 3-master
cluster whose slots can be moved live under a client, and a Sentinel set whose
master redis-py finds before and after a failover, sync and asyncio alike."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.cluster
import redis.sentinel

from django_xsm.backend.clients import aclose_sentinels
from tests.redis.servers import RedisServer
from tests.topology import cluster as cluster_module
from tests.topology.servers import (
    HOST,
    SLOTS,
    RedisCluster3,
    SentinelSet,
    admin,
    close_sentinels,
    info,
    needs_topology,
)

pytestmark = [needs_topology, pytest.mark.fault]


def owner_map(topology: RedisCluster3) -> dict[int, int]:
    """slot -> owner port, from the first node's view."""
    return {
        slot: node["port"]
        for node in topology.cluster_nodes(topology.ports[0])
        for lo, hi in node["slots"]
        for slot in range(lo, hi + 1)
    }


def one_key_per_master(topology: RedisCluster3, prefix: str) -> dict[int, str]:
    owners = owner_map(topology)
    found: dict[int, str] = {}
    for i in range(1000):
        key = f"{prefix}:{i}"
        found.setdefault(owners[topology.keyslot(key)], key)
        if len(found) == topology.size:
            return found
    raise AssertionError("no key for some master")


# --- cluster -------------------------------------------------------------------------


def test_three_masters_cover_every_slot_exactly_once(redis_cluster: RedisCluster3) -> None:
    for port in redis_cluster.ports:
        ci = redis_cluster.cluster_info(port)
        assert ci["cluster_state"] == "ok"
        assert int(ci["cluster_slots_assigned"]) == SLOTS
        assert int(ci["cluster_size"]) == 3
        assert int(ci["cluster_known_nodes"]) == 3
    masters = [
        n for n in redis_cluster.cluster_nodes(redis_cluster.ports[0]) if "master" in n["flags"]
    ]
    assert sorted(n["port"] for n in masters) == sorted(redis_cluster.ports)
    covered = [s for n in masters for lo, hi in n["slots"] for s in range(lo, hi + 1)]
    assert len(covered) == SLOTS
    assert set(covered) == set(range(SLOTS))
    assert all(n["slots"] for n in masters)


def test_cluster_client_writes_land_on_the_owning_master(
    redis_cluster: RedisCluster3, cluster_client: redis.cluster.RedisCluster
) -> None:
    primaries = cluster_client.get_primaries()
    assert sorted((n.host, n.port) for n in primaries) == sorted(
        (HOST, p) for p in redis_cluster.ports
    )
    for port, key in one_key_per_master(redis_cluster, "rt").items():
        assert cluster_client.set(key, f"v-{port}")
        assert cluster_client.get(key) == f"v-{port}"
        assert admin(redis_cluster.server(port), "GET", key) == f"v-{port}"
        other = next(p for p in redis_cluster.ports if p != port)
        # redis-py 5.0 raises a plain ResponseError "MOVED <slot> <host>:<port>"
        # where later ones raise MovedError (a ResponseError) with host and port.
        with pytest.raises(redis.exceptions.ResponseError) as moved:
            admin(redis_cluster.server(other), "GET", key)
        if isinstance(moved.value, redis.exceptions.MovedError):
            assert (moved.value.host, moved.value.port) == (HOST, port)
        else:
            assert str(moved.value).split()[::2] == ["MOVED", f"{HOST}:{port}"], moved.value
    from_url = redis.cluster.RedisCluster.from_url(redis_cluster.seed_url, decode_responses=True)
    try:
        assert from_url.get(key) == f"v-{port}"
    finally:
        from_url.close()


def test_migrate_slot_moves_keys_and_clients_follow(
    redis_cluster: RedisCluster3, cluster_client: redis.cluster.RedisCluster
) -> None:
    keys = [f"{{mig}}:{i}" for i in range(250)]
    slot = redis_cluster.keyslot(keys[0])
    assert {cluster_client.keyslot(k) for k in keys} == {slot}
    cluster_client.mset({k: k.upper() for k in keys})
    source = redis_cluster.node_for_slot(slot)
    target = next(p for p in redis_cluster.ports if p != source)
    seen_mid_way: list[int] = []

    def during(moved: int) -> None:  # keys split between source and target: ASK redirects
        if moved < len(keys):
            assert all(cluster_client.get(k) == k.upper() for k in keys)
            seen_mid_way.append(moved)

    assert redis_cluster.migrate_slot(slot, target, batch=100, during=during) == 250
    assert seen_mid_way == [100, 200]
    assert redis_cluster.node_for_slot(slot) == target
    for port in redis_cluster.ports:
        assert int(admin(redis_cluster.server(port), "CLUSTER", "KEYSLOT", keys[0])) == slot
        owners = [
            n["port"]
            for n in redis_cluster.cluster_nodes(port)
            if any(lo <= slot <= hi for lo, hi in n["slots"])
        ]
        assert owners == [target]
    assert redis_cluster.open_slots() == []
    counts = {
        p: int(admin(redis_cluster.server(p), "CLUSTER", "COUNTKEYSINSLOT", slot))
        for p in (source, target)
    }
    assert counts == {source: 0, target: 250}
    # The client's slot table still names the source: it must follow MOVED.
    assert cluster_client.mget(keys) == [k.upper() for k in keys]
    assert cluster_client.set("{mig}:new", "x")
    assert admin(redis_cluster.server(target), "GET", "{mig}:new") == "x"
    # And back again, so the session's layout is the one it started with.
    assert redis_cluster.migrate_slot(slot, source) == 251
    assert redis_cluster.node_for_slot(slot) == source
    assert cluster_client.get("{mig}:new") == "x"


async def test_async_cluster_client_reaches_every_master(
    redis_cluster: RedisCluster3, cluster_client: redis.cluster.RedisCluster
) -> None:
    client = redis_cluster.async_client(decode_responses=True)
    try:
        keys = one_key_per_master(redis_cluster, "async")
        for port, key in keys.items():
            assert await client.set(key, str(port))
        assert [await client.get(k) for k in keys.values()] == [str(p) for p in keys]
        assert sorted(n.port for n in client.get_primaries()) == sorted(redis_cluster.ports)
        assert all(cluster_client.get(k) == str(p) for p, k in keys.items())
    finally:
        await client.aclose()


# --- sentinel ------------------------------------------------------------------------


def test_sentinels_know_master_replica_and_each_other(sentinel_set: SentinelSet) -> None:
    for s in sentinel_set.sentinels:
        with s.client(decode_responses=True) as c:
            master = c.sentinel_master(sentinel_set.service)
            assert (master["ip"], master["port"]) == (HOST, sentinel_set.primary.port)
            assert master["num-other-sentinels"] == 2
            assert master["quorum"] == 2
            replicas = c.sentinel_slaves(sentinel_set.service)
            assert [r["port"] for r in replicas] == [sentinel_set.replica.port]
            assert len(c.sentinel_sentinels(sentinel_set.service)) == 2


def test_master_for_writes_reach_the_replica(
    sentinel_set: SentinelSet, sentinel: redis.sentinel.Sentinel
) -> None:
    primary, replica = sentinel_set.primary, sentinel_set.replica
    assert sentinel.discover_master(sentinel_set.service) == (HOST, primary.port)
    assert sentinel.discover_slaves(sentinel_set.service) == [(HOST, replica.port)]
    master = sentinel.master_for(sentinel_set.service)
    reader = sentinel.slave_for(sentinel_set.service)
    try:
        assert master.set("greeting", "hello")
        assert master.execute_command("WAIT", 1, 5000) == 1
        assert admin(replica, "GET", "greeting") == "hello"
        assert reader.get("greeting") == "hello"
        with pytest.raises(redis.ReadOnlyError):
            reader.set("greeting", "nope")
    finally:
        master.close()
        reader.close()


def test_failover_moves_the_master_and_a_fresh_client_writes(
    sentinel_set: SentinelSet, sentinel: redis.sentinel.Sentinel
) -> None:
    old_primary, old_replica = sentinel_set.primary, sentinel_set.replica
    before = sentinel_set.master_address()
    old = sentinel.master_for(sentinel_set.service)
    assert old.set("before", "1")
    assert old.execute_command("WAIT", 1, 5000) == 1
    old.close()

    after = sentinel_set.failover()
    assert after != before
    assert after == (HOST, old_replica.port)
    assert (sentinel_set.primary, sentinel_set.replica) == (old_replica, old_primary)
    demoted = info(old_primary, "replication")
    assert (demoted["role"], demoted["master_port"]) == ("slave", old_replica.port)
    assert demoted["master_link_status"] == "up"

    fresh = sentinel_set.sentinel(decode_responses=True)
    master = fresh.master_for(sentinel_set.service)
    try:
        assert fresh.discover_master(sentinel_set.service) == after
        assert master.get("before") == "1"
        assert master.set("after", "2")
        assert master.execute_command("WAIT", 1, 5000) == 1
        assert admin(old_primary, "GET", "after") == "2"
    finally:
        master.close()
        close_sentinels(fresh)


def test_killed_primary_is_replaced_by_the_sentinels(
    sentinel_set: SentinelSet, sentinel: redis.sentinel.Sentinel
) -> None:
    dead, survivor = sentinel_set.primary, sentinel_set.replica
    master = sentinel.master_for(sentinel_set.service)
    assert master.set("survives", "yes")
    assert master.execute_command("WAIT", 1, 5000) == 1
    master.close()

    assert sentinel_set.kill_primary() == (HOST, survivor.port)
    # Restarted and settled: one node follows the other, the one the sentinels name
    # (on a loaded machine they may have failed back over to the restarted node).
    primary, replica = sentinel_set.primary, sentinel_set.replica
    assert {primary, replica} == {dead, survivor}
    following = info(replica, "replication")
    assert (following["role"], int(following["master_port"])) == ("slave", primary.port)
    assert sentinel_set.master_address() == (HOST, primary.port)
    master = sentinel_set.sentinel(decode_responses=True).master_for(sentinel_set.service)
    try:
        assert master.get("survives") == "yes"
        assert master.set("later", "1")
    finally:
        master.close()


async def test_async_sentinel_finds_and_uses_the_master(
    sentinel_set: SentinelSet, sentinel: redis.sentinel.Sentinel
) -> None:
    client = sentinel_set.async_sentinel(decode_responses=True)
    master = client.master_for(sentinel_set.service)
    reader = client.slave_for(sentinel_set.service)
    try:
        assert await client.discover_master(sentinel_set.service) == sentinel_set.master_address()
        assert await master.set("async", "yes")
        assert await master.execute_command("WAIT", 1, 5000) == 1
        assert await reader.get("async") == "yes"
    finally:
        await master.aclose()
        await reader.aclose()
        await aclose_sentinels(client)


# --- the harness cleans up after itself -------------------------------------------------


def _stopped_servers(monkeypatch: pytest.MonkeyPatch, topology: Any) -> list[RedisServer]:
    """Filled, when ``topology.stop()`` runs, with the servers it is about to stop."""
    seen: list[RedisServer] = []
    real_stop = topology.stop

    def stop() -> None:
        seen.extend(topology.servers)
        real_stop()

    monkeypatch.setattr(topology, "stop", stop)
    return seen


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("never settles")


@pytest.mark.parametrize("kind", ["cluster: redis-cli fails", "sentinel: never settles"])
def test_a_startup_failing_halfway_stops_every_process(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    topology: RedisCluster3 | SentinelSet
    if kind.startswith("cluster"):
        monkeypatch.setattr(cluster_module, "REDIS_CLI", "/bin/false")
        topology, expected, error = RedisCluster3(), 3, "--cluster create failed"
    else:
        topology, expected, error = SentinelSet(), 5, "never settles"
        monkeypatch.setattr(topology, "wait_settled", _refuse)
    stopped = _stopped_servers(monkeypatch, topology)
    with pytest.raises(AssertionError, match=error):
        topology.start()
    assert len(stopped) == expected
    for server in stopped:
        assert server.proc is not None
        assert server.proc.returncode is not None  # reaped: it was ours and it is gone
        assert not server.dir.exists()
    assert topology.servers == []
    assert topology.base is None
