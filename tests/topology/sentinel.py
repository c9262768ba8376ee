"""A Sentinel-managed primary/replica pair on loopback: three sentinels, quorum 2,
with a forced (SENTINEL FAILOVER) and a crash-driven (SIGKILL) failover."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import redis.asyncio.sentinel
import redis.sentinel

from tests.redis.servers import REDIS_SERVER, RedisServer, wait_until
from tests.topology.base import HOST, TIMEOUTS, Topology


def close_sentinels(manager: redis.sentinel.Sentinel) -> None:
    """``Sentinel.close()``, which redis-py has only since 8.0: before it, the
    client of each sentinel is closed one by one (what ``close()`` does)."""
    close = getattr(manager, "close", None)
    if close is not None:
        close()
        return
    for client in manager.sentinels:
        client.close()


class SentinelServer(RedisServer):
    """``redis-server <conf> --sentinel``: the config (which Sentinel rewrites) comes first."""

    def __init__(
        self,
        *,
        directory: Path,
        service: str,
        primary_port: int,
        quorum: int,
        down_after_ms: int,
        failover_timeout_ms: int,
    ) -> None:
        super().__init__(directory=directory)
        self.conf = self.dir / "sentinel.conf"
        self.conf.write_text(
            f"port {self.port}\n"
            f"bind {HOST}\n"
            f"dir {self.dir}\n"
            f"logfile {self.dir / 'redis.log'}\n"
            "daemonize no\n"
            "sentinel resolve-hostnames no\n"
            f"sentinel monitor {service} {HOST} {primary_port} {quorum}\n"
            f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
            f"sentinel failover-timeout {service} {failover_timeout_ms}\n"
        )

    def argv(self) -> list[str]:
        return [REDIS_SERVER, str(self.conf), "--sentinel"]


# No 5 s wait for more replicas before a diskless full sync (the default delay).
DATA_NODE_ARGS = ["--repl-diskless-sync-delay", "0"]


def _replica_of(server: RedisServer, port: int | None) -> None:
    """Set (or drop) the ``--replicaof`` a server starts with next time."""
    extra = server.extra
    if "--replicaof" in extra:
        i = extra.index("--replicaof")
        del extra[i : i + 3]
    if port is not None:
        extra += ["--replicaof", HOST, str(port)]


class SentinelSet(Topology):
    """One primary, one replica, three sentinels (quorum 2) watching ``service``.

    ``primary``/``replica`` follow the roles: after :meth:`failover` they swap."""

    prefix = "xsm-sentinel-"

    def __init__(
        self,
        *,
        service: str = "mymaster",
        sentinels: int = 3,
        quorum: int = 2,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
    ) -> None:
        super().__init__()
        self.service = service
        self.n_sentinels = sentinels
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self._primary: RedisServer | None = None
        self._replica: RedisServer | None = None
        self.sentinels: list[SentinelServer] = []

    def _start(self) -> None:
        self._primary = self._spawn(
            lambda d: RedisServer(directory=d, extra=list(DATA_NODE_ARGS)), "data-a"
        )
        self._primary.wait_ready()
        port = self._primary.port
        self._replica = self._spawn(
            lambda d: RedisServer(
                directory=d, extra=[*DATA_NODE_ARGS, "--replicaof", HOST, str(port)]
            ),
            "data-b",
        )
        self._replica.wait_ready()
        for i in range(self.n_sentinels):
            sentinel = self._spawn(
                lambda d: SentinelServer(
                    directory=d,
                    service=self.service,
                    primary_port=port,
                    quorum=self.quorum,
                    down_after_ms=self.down_after_ms,
                    failover_timeout_ms=self.failover_timeout_ms,
                ),
                f"sentinel{i}",
            )
            self.sentinels.append(sentinel)
        for sentinel in self.sentinels:
            sentinel.wait_ready()
        self.wait_settled()

    def stop(self) -> None:
        self.sentinels.clear()
        super().stop()

    # --- addresses and clients ---------------------------------------------------------

    @property
    def primary(self) -> RedisServer:
        assert self._primary is not None, "SentinelSet not started"
        return self._primary

    @property
    def replica(self) -> RedisServer:
        assert self._replica is not None, "SentinelSet not started"
        return self._replica

    @property
    def sentinel_hosts(self) -> list[tuple[str, int]]:
        return [(HOST, s.port) for s in self.sentinels]

    def sentinel(self, **kwargs: Any) -> redis.sentinel.Sentinel:
        """redis-py's Sentinel over our sentinels (``kwargs`` go to master/replica links)."""
        return redis.sentinel.Sentinel(
            self.sentinel_hosts, sentinel_kwargs=dict(TIMEOUTS), **{**TIMEOUTS, **kwargs}
        )

    def async_sentinel(self, **kwargs: Any) -> redis.asyncio.sentinel.Sentinel:
        return redis.asyncio.sentinel.Sentinel(
            self.sentinel_hosts, sentinel_kwargs=dict(TIMEOUTS), **{**TIMEOUTS, **kwargs}
        )

    def master_address(self) -> tuple[str, int]:
        """What every sentinel answers to GET-MASTER-ADDR-BY-NAME; they must agree."""
        answers = set()
        for s in self.sentinels:
            host, port = self.command(s, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            answers.add((str(host), int(port)))
        if len(answers) != 1:
            raise AssertionError(f"sentinels disagree on the master: {answers}")
        return answers.pop()

    # --- waiting -----------------------------------------------------------------------

    def unsettled(self) -> str:
        """Why the set is not settled yet ("" once it is): a reason for timeouts."""
        primary, replica = self.primary, self.replica
        repl = self.server_info(replica, "replication")
        if repl.get("role") == "master" and self._follows(primary, replica):
            # The sentinels failed the primary over while the set was starting
            # (a loaded machine kept it from answering within down_after_ms):
            # the set settles on their choice, with the two nodes' roles swapped.
            self._primary, self._replica = replica, primary
            primary, replica = replica, primary
            repl = self.server_info(replica, "replication")
        if repl.get("master_link_status") != "up" or int(repl["master_port"]) != primary.port:
            link = {k: repl.get(k) for k in ("role", "master_port", "master_link_status")}
            return f"replica :{replica.port} not linked up to :{primary.port}: {link}"
        if self.server_info(primary, "replication").get("role") != "master":
            return f"primary :{primary.port} is not a master"
        for s in self.sentinels:
            c = self._client(s)
            m = cast("dict[str, Any]", c.sentinel_master(self.service))
            if int(m["port"]) != primary.port or not m["is_master"]:
                return f"sentinel :{s.port} names master :{m['port']}"
            if m["is_sdown"] or m["is_odown"] or "failover_in_progress" in m["flags"]:
                return f"sentinel :{s.port} sees the master as {m['flags']}"
            # Only presence is real here: a replica entry the sentinel just created
            # says role slave / link ok until its next INFO, up to 10 s later.
            replicas = c.sentinel_slaves(self.service)
            if not any(
                r["port"] == replica.port and not (r["is_sdown"] or r["is_disconnected"])
                for r in replicas
            ):
                flags = {r["port"]: r["flags"] for r in replicas}
                return f"sentinel :{s.port} lacks replica :{replica.port}: {flags}"
            known = cast("list[dict[str, Any]]", c.sentinel_sentinels(self.service))
            peers = [p for p in known if not p["is_sdown"]]
            if len(peers) != self.n_sentinels - 1:
                return f"sentinel :{s.port} sees {len(peers)} live peers"
        return ""

    def _follows(self, node: RedisServer, master: RedisServer) -> bool:
        """``node`` answers, as a replica of ``master``."""
        try:
            info = self.server_info(node, "replication")
        except redis.RedisError:  # stopped by the test, or restarting
            return False
        return info.get("role") == "slave" and int(info.get("master_port") or 0) == master.port

    def wait_settled(self, timeout: float = 60.0) -> None:
        """Until the replica's link is up and every sentinel knows master, replica, peers."""
        last = ["not asked yet"]

        def settled() -> bool:
            last[0] = self.unsettled()
            return not last[0]

        try:
            wait_until(settled, timeout=timeout, what="the sentinel set to settle")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {last[0]}\n{self.logs()}") from None

    # --- operations --------------------------------------------------------------------

    def flushall(self) -> None:
        """FLUSHALL on the primary, acknowledged by the replica."""
        with self.primary.client() as c:
            c.flushall()
            if c.execute_command("WAIT", 1, 5000) != 1:
                raise AssertionError(f"replica :{self.replica.port} did not ack FLUSHALL")

    def failover(self, *, settle: bool = True, timeout: float = 60.0) -> tuple[str, int]:
        """SENTINEL FAILOVER on one sentinel (no quorum needed); return the new master.

        The promotion and the sentinels' switch take ~1 s, but Sentinel turns the old
        primary (still up, still a master) into a replica only ~10 s later. With
        ``settle=False`` return at the switch, inside that window; else wait it out."""
        old_primary, old_replica = self.primary, self.replica

        def ask() -> bool:  # -NOGOODSLAVE/-INPROG while the sentinels catch up: retried
            return bool(
                self.command(self.sentinels[0], "SENTINEL", "FAILOVER", self.service) == "OK"
            )

        wait_until(ask, timeout=timeout, what="SENTINEL FAILOVER to be accepted")
        self._primary, self._replica = old_replica, old_primary
        if settle:
            self.wait_settled(timeout)
        else:
            wait_until(self._switched, timeout=timeout, what="the sentinels to switch master")
        return self.master_address()

    def _switched(self) -> bool:
        """The primary says role:master and every sentinel names it."""
        promoted = self.server_info(self.primary, "replication").get("role") == "master"
        return promoted and self.master_address()[1] == self.primary.port

    def kill_primary(self, *, restart: bool = True, timeout: float = 60.0) -> tuple[str, int]:
        """SIGKILL the primary; the sentinels must see it down (quorum) and promote the
        replica themselves. ``restart`` brings the dead one back as the new replica
        (else call :meth:`revive_replica` before the set can settle again).

        Returns the master the sentinels named at the switch. After the restart a
        loaded machine can make them fail over once more (the set then settles on
        their choice), so the address is taken before it."""
        old_primary, old_replica = self.primary, self.replica
        old_primary.kill9()
        self._primary, self._replica = old_replica, old_primary
        wait_until(self._switched, timeout=timeout, what="the sentinels to promote the replica")
        promoted = self.master_address()
        if restart:
            self.revive_replica(timeout)
        return promoted

    def revive_replica(self, timeout: float = 60.0) -> None:
        """(Re)start the replica process replicating from the current primary, as the
        config Sentinel rewrites on a real node would have it."""
        _replica_of(self.replica, self.primary.port)
        self.replica.stop()
        self.replica.start()
        self.wait_settled(timeout)
