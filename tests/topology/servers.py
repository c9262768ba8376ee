"""Real local Redis topologies for tests: the public names in one place.

:class:`RedisCluster3` (three cluster masters) and :class:`SentinelSet` (a
primary, a replica and three sentinels) are built from
:class:`tests.redis.servers.RedisServer` processes on free loopback ports, are
stopped by pid (never the shared :6379) and wait by polling with a deadline.
"""

from __future__ import annotations

from tests.topology.base import (
    HOST,
    REDIS_CLI,
    SLOTS,
    Topology,
    admin,
    info,
    needs_topology,
    topology_available,
)
from tests.topology.cluster import RedisCluster3, parse_cluster_nodes
from tests.topology.sentinel import SentinelServer, SentinelSet, close_sentinels

__all__ = [
    "HOST",
    "REDIS_CLI",
    "SLOTS",
    "RedisCluster3",
    "SentinelServer",
    "SentinelSet",
    "Topology",
    "admin",
    "close_sentinels",
    "info",
    "needs_topology",
    "parse_cluster_nodes",
    "topology_available",
]
