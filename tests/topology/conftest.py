"""Topology fixtures: one cluster and one sentinel set per session (each takes
seconds to start), and per-test clients that begin on empty data with the
topology checked healthy, so a test may move slots or fail over freely."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis.cluster
import redis.sentinel

from tests.topology.servers import (
    RedisCluster3,
    SentinelSet,
    close_sentinels,
    topology_available,
)


def _require_binaries() -> None:
    if not topology_available():
        pytest.skip("redis-server or redis-cli is not installed")


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster3]:
    """Three cluster masters on loopback, stopped by pid at the end of the session."""
    _require_binaries()
    with RedisCluster3() as cluster:
        yield cluster


@pytest.fixture
def cluster_client(redis_cluster: RedisCluster3) -> Iterator[redis.cluster.RedisCluster]:
    """A ``decode_responses`` cluster client on flushed masters (no slot left open)."""
    redis_cluster.wait_healthy()
    redis_cluster.flushall()
    client = redis_cluster.client(decode_responses=True)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def sentinel_set() -> Iterator[SentinelSet]:
    """Primary + replica + three sentinels, stopped by pid at the end of the session."""
    _require_binaries()
    with SentinelSet() as topology:
        yield topology


@pytest.fixture
def sentinel(sentinel_set: SentinelSet) -> Iterator[redis.sentinel.Sentinel]:
    """redis-py's ``Sentinel`` (``decode_responses``) on a settled, flushed set; the
    roles may differ from the last test's (``sentinel_set.primary`` follows them)."""
    sentinel_set.wait_settled()
    sentinel_set.flushall()
    client = sentinel_set.sentinel(decode_responses=True)
    try:
        yield client
    finally:
        close_sentinels(client)
