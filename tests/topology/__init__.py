"""Tests against real local Redis topologies: a 3-master Redis Cluster and a
Sentinel-managed primary/replica pair, all on loopback, all started and
stopped by pid by :mod:`tests.topology.servers` (never the shared :6379)."""
