"""What both topologies share: the binaries, the skip marker, one-command helpers
and :class:`Topology`, which owns a temporary directory and every process it
started there, and stops them all by pid - also when startup fails halfway."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import pytest
import redis

from tests.redis.servers import REDIS_SERVER, RedisServer

# XSM_REDIS_CLI: the redis-cli of the server that XSM_REDIS_SERVER names.
REDIS_CLI = os.environ.get("XSM_REDIS_CLI") or "/usr/bin/redis-cli"
HOST = "127.0.0.1"
SLOTS = 16384
TIMEOUTS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}

S = TypeVar("S", bound=RedisServer)


def topology_available() -> bool:
    """Whether both binaries are there (fixtures skip with this; tests use the mark)."""
    return os.access(REDIS_SERVER, os.X_OK) and os.access(REDIS_CLI, os.X_OK)


needs_topology = pytest.mark.skipif(
    not topology_available(), reason=f"{REDIS_SERVER} or {REDIS_CLI} is not installed"
)


def info(server: RedisServer, section: str) -> dict[str, Any]:
    """``INFO <section>`` of one server, parsed by redis-py."""
    with server.client() as c:
        return dict(c.info(section))


def admin(server: RedisServer, *args: Any) -> Any:
    """One command on one node, no redis-py reply callback (``args[0]`` is a bare word)."""
    with server.client(decode_responses=True) as c:
        return c.execute_command(*args)


class Topology:
    """Owns a temporary directory and every server started in it."""

    prefix = "xsm-topology-"

    def __init__(self) -> None:
        self.base: Path | None = None  # made by start(), removed by stop()
        self.servers: list[RedisServer] = []
        self._clients: dict[int, redis.Redis] = {}  # one pooled admin link per port
        self._started = False

    def _spawn(self, make: Callable[[Path], S], name: str) -> S:
        """Create a server on a port no sibling uses, record it, then launch it (no wait)."""
        assert self.base is not None, "start() first"
        directory = self.base / name
        directory.mkdir(exist_ok=True)
        used = {s.port for s in self.servers}
        server = make(directory)
        while server.port in used:  # free_port() may hand out a sibling's port again
            server = make(directory)
        self.servers.append(server)
        server.start(wait=False)
        return server

    def _start(self) -> None:
        raise NotImplementedError

    def _client(self, server: RedisServer) -> redis.Redis:
        """A kept admin connection: a poll every 10 ms must not open a socket per try."""
        client = self._clients.get(server.port)
        if client is None:
            client = self._clients[server.port] = server.client(decode_responses=True)
        return client

    def command(self, server: RedisServer, *args: Any) -> Any:
        """:func:`admin` over the kept connection."""
        return self._client(server).execute_command(*args)

    def server_info(self, server: RedisServer, section: str) -> dict[str, Any]:
        """:func:`info` over the kept connection."""
        return dict(self._client(server).info(section))

    def start(self) -> Self:
        """Start everything and wait until it is usable; on any failure stop what began."""
        if self._started:
            return self
        self.base = Path(tempfile.mkdtemp(prefix=self.prefix))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self._started = True
        return self

    def stop(self) -> None:
        """Stop every process by pid (newest first), then remove the directory."""
        errors: list[Exception] = []
        for server in reversed(self.servers):
            try:
                server.cleanup()
            except Exception as exc:  # keep stopping the others
                errors.append(exc)
        self.servers.clear()
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None
        self._started = False
        if errors:
            raise errors[0]

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.servers if s.proc is not None]

    def logs(self) -> str:
        """The tail of every log, to explain a timeout."""
        return "\n".join(f"--- {s.dir.name}:{s.port}\n{s.log_tail()[-1500:]}" for s in self.servers)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
