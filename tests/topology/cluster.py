"""A 3-master Redis Cluster on loopback, created by ``redis-cli --cluster create``,
with a live slot migration (the protocol ``redis-cli --cluster reshard`` runs)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis.asyncio.cluster
import redis.cluster

from tests.redis.servers import RedisServer, free_port, port_is_free, server_version, wait_until
from tests.topology.base import HOST, REDIS_CLI, SLOTS, TIMEOUTS, Topology


def parse_cluster_nodes(text: str) -> list[dict[str, Any]]:
    """``CLUSTER NODES`` as dicts: id, port, flags, master, slots [(lo, hi)], open [str]."""
    nodes = []
    for line in text.strip().splitlines():
        fields = line.split()
        slots: list[tuple[int, int]] = []
        open_slots: list[str] = []
        for spec in fields[8:]:
            if spec.startswith("["):  # [slot->-id] migrating, [slot-<-id] importing
                open_slots.append(spec)
                continue
            lo, _, hi = spec.partition("-")
            slots.append((int(lo), int(hi or lo)))
        address = fields[1].split("@")[0]
        nodes.append(
            {
                "id": fields[0],
                "port": int(address.rsplit(":", 1)[1]),
                "flags": set(fields[2].split(",")),
                "master": fields[3],
                "slots": slots,
                "open": open_slots,
            }
        )
    return nodes


def _parse_info_text(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.strip().splitlines() if ":" in line)


class ClusterServer(RedisServer):
    """A cluster-enabled redis-server with its own ``nodes.conf`` and a bus port picked
    free (the default, port + 10000, may be in use or above 65535)."""

    def __init__(self, *, directory: Path, node_timeout_ms: int, taken: set[int]) -> None:
        super().__init__(directory=directory)
        self.extra += [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(directory / "nodes.conf"),
            "--cluster-node-timeout",
            str(node_timeout_ms),
        ]
        if server_version() < (7, 0):
            # --cluster-port is Redis 7's: before it the bus is port + 10000,
            # so pick a port whose bus port is free too.
            while (
                self.port + 10000 > 65535
                or {self.port, self.port + 10000} & taken
                or not port_is_free(self.port + 10000)
            ):
                self.port = free_port()
            self.bus_port = self.port + 10000
            return
        self.bus_port = free_port()
        while self.bus_port in taken | {self.port}:
            self.bus_port = free_port()
        self.extra += ["--cluster-port", str(self.bus_port)]


class RedisCluster3(Topology):
    """Three masters, no replicas, the 16384 slots split evenly by ``redis-cli``."""

    prefix = "xsm-cluster-"
    size = 3

    def __init__(self, *, node_timeout_ms: int = 2000) -> None:
        super().__init__()
        self.node_timeout_ms = node_timeout_ms

    def _node(self, directory: Path) -> ClusterServer:
        taken = {p for s in self.masters for p in (s.port, s.bus_port)}
        return ClusterServer(directory=directory, node_timeout_ms=self.node_timeout_ms, taken=taken)

    def _start(self) -> None:
        for i in range(self.size):
            self._spawn(self._node, f"node{i}")
        for server in self.servers:
            server.wait_ready()
        argv = [REDIS_CLI, "--cluster", "create", *(f"{HOST}:{p}" for p in self.ports)]
        done = subprocess.run(
            [*argv, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"redis-cli --cluster create failed:\n{done.stdout}{done.stderr}")
        self.wait_healthy()

    # --- addresses and clients ---------------------------------------------------------

    @property
    def masters(self) -> list[ClusterServer]:
        return [s for s in self.servers if isinstance(s, ClusterServer)]

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.masters]

    @property
    def seed_url(self) -> str:
        return f"redis://{HOST}:{self.ports[0]}/0"

    @property
    def startup_nodes(self) -> list[redis.cluster.ClusterNode]:
        return [redis.cluster.ClusterNode(HOST, p) for p in self.ports]

    def server(self, port: int) -> ClusterServer:
        return next(s for s in self.masters if s.port == port)

    def client(self, **kwargs: Any) -> redis.cluster.RedisCluster:
        """A cluster client seeded with the first node; it discovers the other two."""
        return redis.cluster.RedisCluster(host=HOST, port=self.ports[0], **{**TIMEOUTS, **kwargs})

    def async_client(self, **kwargs: Any) -> redis.asyncio.cluster.RedisCluster:
        """The asyncio twin of :meth:`client` (connects on first command; ``aclose()`` it)."""
        return redis.asyncio.cluster.RedisCluster(
            host=HOST, port=self.ports[0], **{**TIMEOUTS, **kwargs}
        )

    # --- what the nodes say ------------------------------------------------------------

    def cluster_info(self, port: int) -> dict[str, str]:
        return _parse_info_text(self.command(self.server(port), "CLUSTER", "INFO"))

    def cluster_nodes(self, port: int) -> list[dict[str, Any]]:
        """One node's view of the cluster."""
        return parse_cluster_nodes(self.command(self.server(port), "CLUSTER", "NODES"))

    def node_ids(self) -> dict[int, str]:
        return {p: self.command(self.server(p), "CLUSTER", "MYID") for p in self.ports}

    def keyslot(self, key: str | bytes) -> int:
        return int(self.command(self.servers[0], "CLUSTER", "KEYSLOT", key))

    def node_for_slot(self, slot: int) -> int:
        """Port of the master owning ``slot``; every node must agree (else AssertionError)."""
        views = {
            tuple(
                int(n["port"])
                for n in self.cluster_nodes(port)
                if any(lo <= slot <= hi for lo, hi in n["slots"])
            )
            for port in self.ports
        }
        if len(views) != 1 or len(owner := next(iter(views))) != 1:
            raise AssertionError(f"no single owner of slot {slot}: {views}")
        return owner[0]

    def open_slots(self) -> list[str]:
        """Slots left MIGRATING/IMPORTING on any node (a half-done migration)."""
        return [spec for p in self.ports for n in self.cluster_nodes(p) for spec in n["open"]]

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until every node says ``cluster_state:ok`` with all slots, all nodes, one view."""

        def healthy() -> bool:
            views = set()
            for port in self.ports:
                ci = self.cluster_info(port)
                ok = (
                    ci["cluster_state"] == "ok"
                    and int(ci["cluster_slots_assigned"]) == SLOTS
                    and int(ci["cluster_slots_ok"]) == SLOTS
                    and int(ci["cluster_known_nodes"]) == self.size
                )
                nodes = self.cluster_nodes(port)
                if not ok or any(n["open"] for n in nodes):
                    return False
                views.add(frozenset((n["port"], tuple(sorted(n["slots"]))) for n in nodes))
            return len(views) == 1

        try:
            wait_until(healthy, timeout=timeout, what="cluster_state:ok on every node")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    # --- operations --------------------------------------------------------------------

    def flushall(self) -> None:
        for server in self.servers:
            self.command(server, "FLUSHALL")

    def migrate_slot(
        self,
        slot: int,
        to_port: int,
        *,
        batch: int = 100,
        timeout_ms: int = 5000,
        during: Callable[[int], object] | None = None,
    ) -> int:
        """Move ``slot`` and its keys to ``to_port`` live, as ``redis-cli --cluster
        reshard`` does; return how many keys moved. ``during(moved_so_far)`` runs after
        each MIGRATE batch, while the slot is split between the two nodes (ASK)."""
        source_port = self.node_for_slot(slot)
        if source_port == to_port:
            return 0
        ids = self.node_ids()
        source, target = self.server(source_port), self.server(to_port)
        self.command(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source_port])
        self.command(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to_port])
        moved = 0
        with source.client(socket_timeout=timeout_ms / 1000 + 5) as src:  # keys stay bytes
            while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch):
                src.execute_command("MIGRATE", HOST, to_port, "", 0, timeout_ms, "KEYS", *keys)
                moved += len(keys)
                if during is not None:
                    during(moved)
        # The target first (it bumps its epoch), then the source, then everyone else.
        for port in dict.fromkeys([to_port, source_port, *self.ports]):
            self.command(self.server(port), "CLUSTER", "SETSLOT", slot, "NODE", ids[to_port])
        wait_until(
            lambda: self.node_for_slot(slot) == to_port and not self.open_slots(),
            timeout=10,
            what=f"slot {slot} owned by :{to_port} on every node",
        )
        return moved
