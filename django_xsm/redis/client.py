"""Clients and the two drivers that run core generators (sync / asyncio).

A client built here from a URL gets 5 s socket and connect timeouts, so an
unreachable or paused server surfaces as ``StoreUnavailableError`` within
that time instead of hanging. A client passed in keeps its own settings.
redis-py may retry commands after connection errors and timeouts (clients
built with ``redis.Redis(...)`` do by default); the commit script recognises
a retried commit by its id.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import redis
import redis.asyncio
from redis.exceptions import NoScriptError

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.runner import Apply, adrive, drive

from . import scripts
from .core import Cmd, Many, Op, Request
from .errors import translate_errors
from .ops import Call

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AsyncDriver",
    "AsyncSide",
    "SyncDriver",
    "SyncSide",
    "resolve_async_client",
    "resolve_client",
    "same_server",
]

DEFAULT_TIMEOUT_S = 5.0
SOURCES: dict[str, str] = {name: getattr(scripts, name) for name in scripts.__all__}
#: SHA1 of each script, as EVALSHA wants it (computed here: no round trip).
SHAS: dict[str, str] = {
    name: hashlib.sha1(src.encode(), usedforsecurity=False).hexdigest()
    for name, src in SOURCES.items()
}
_URL_SCHEMES = ("redis", "rediss", "unix")
_url_clients: dict[str, redis.Redis] = {}
_url_lock = threading.Lock()

T = TypeVar("T")


def _check_url(url: str) -> None:
    scheme = urlsplit(url).scheme
    if scheme not in _URL_SCHEMES:
        raise InvalidConfigError(
            f"Unsupported Redis URL scheme {scheme or '(none)'!r}",
            path="client_or_url",
            hint="use redis://host:6379/0, rediss:// for TLS or unix:///path/redis.sock",
        )


def _checked_client(client: Any, *, want_async: bool) -> Any:
    """``client`` if this side (blocking / asyncio) can drive it."""
    if not (hasattr(client, "evalsha") and hasattr(client, "pipeline")):
        raise InvalidConfigError(
            f"Expected a Redis URL or a redis-py client, got {type(client).__name__}",
            path="client_or_url",
        )
    is_async = inspect.iscoroutinefunction(getattr(client, "execute_command", None))
    if is_async != want_async:
        kind = "an asyncio" if is_async else "a blocking"
        twin = "the Async* classes" if is_async else "RedisStore / RedisInbox / RedisLog"
        raise InvalidConfigError(
            f"Got {kind} client ({type(client).__name__}); use it with {twin}",
            path="client_or_url",
        )
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    if kwargs.get("decode_responses"):
        # Snapshots are bytes (ciphertext with an encrypting codec); decoded
        # replies would make every record look damaged.
        raise InvalidConfigError(
            "The Redis client decodes responses (decode_responses=True)",
            path="client_or_url",
            hint="pass a client built with decode_responses=False (the default)",
        )
    return client


def resolve_client(client_or_url: Any) -> Any:
    """A blocking client: the one given, or one per URL (shared in-process,
    so stores, inboxes and logs built from the same URL share a pool)."""
    if isinstance(client_or_url, str):
        _check_url(client_or_url)
        with _url_lock:
            client = _url_clients.get(client_or_url)
            if client is None:
                client = redis.Redis.from_url(
                    client_or_url,
                    socket_timeout=DEFAULT_TIMEOUT_S,
                    socket_connect_timeout=DEFAULT_TIMEOUT_S,
                )
                _url_clients[client_or_url] = client
        return _checked_client(client, want_async=False)
    return _checked_client(client_or_url, want_async=False)


def resolve_async_client(client_or_url: Any) -> Any:
    """An asyncio client: the one given, or a new one from the URL."""
    if isinstance(client_or_url, str):
        _check_url(client_or_url)
        client_or_url = redis.asyncio.Redis.from_url(
            client_or_url,
            socket_timeout=DEFAULT_TIMEOUT_S,
            socket_connect_timeout=DEFAULT_TIMEOUT_S,
        )
    return _checked_client(client_or_url, want_async=True)


def same_server(a: Any, b: Any) -> bool:
    """True when two clients talk to the same server and database."""
    if a is b:
        return True
    pa, pb = getattr(a, "connection_pool", None), getattr(b, "connection_pool", None)
    if pa is None or pb is None:
        return False
    if pa is pb:
        return True
    keys = ("host", "port", "db", "path", "username", "server")
    ka, kb = pa.connection_kwargs, pb.connection_kwargs
    return type(pa) is type(pb) and all(ka.get(k) == kb.get(k) for k in keys)


def _command(request: Call | Cmd, *, by_source: bool = False) -> tuple[Any, ...]:
    """The command line of one request: a script by SHA (or by source)."""
    if isinstance(request, Cmd):
        return (request.name, *request.args)
    if by_source:
        return ("EVAL", SOURCES[request.script], len(request.keys), *request.keys, *request.args)
    return ("EVALSHA", SHAS[request.script], len(request.keys), *request.keys, *request.args)


@dataclass(frozen=True, slots=True)
class _Line:
    """One command on the wire."""

    command: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _Pipeline:
    """Commands in one pipeline; replies come back with errors in place."""

    commands: tuple[tuple[Any, ...], ...]


# NOSCRIPT (after SCRIPT FLUSH, a restart or a failover) means the script did
# not run. The recovery is EVAL with the source, which runs the script and
# caches it in one step: "SCRIPT LOAD, then EVALSHA again" would fail when
# another client flushes in between. In a pipeline only the calls that met
# NOSCRIPT are sent again; everything else already ran and is not repeated.
# https://redis.io/docs/latest/develop/interact/programmability/eval-intro/


def _on_the_wire(request: Call | Cmd | Many) -> Generator[_Line | _Pipeline, Any, Any]:
    """What one core request sends, as a generator of wire requests (the
    two drivers run it with blocking and asyncio clients)."""
    if isinstance(request, Cmd):
        return (yield _Line(_command(request)))
    if isinstance(request, Call):
        try:
            return (yield _Line(_command(request)))
        except NoScriptError:
            return (yield _Line(_command(request, by_source=True)))
    requests = request.requests
    if not requests:
        return []
    replies = list((yield _Pipeline(tuple(_command(r) for r in requests))))
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        again = yield _Pipeline(tuple(_command(requests[i], by_source=True) for i in missing))
        for i, reply in zip(missing, again, strict=True):
            replies[i] = reply
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


class _Commands(Protocol):
    """``execute_command`` as redis-py defines it (it leaves it unannotated)."""

    def execute_command(self, *args: Any) -> Any: ...


class SyncDriver:
    """Runs core generators on a blocking client."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._commands: _Commands = client

    def run(self, op: Op[T], key: str | None = None) -> T:
        with translate_errors(key):
            return drive(op, self._exec)

    def _exec(self, request: Request) -> Any:
        if isinstance(request, Apply):
            return request()
        return drive(_on_the_wire(request), self._send)

    def _send(self, wire: _Line | _Pipeline) -> Any:
        if isinstance(wire, _Line):
            return self._commands.execute_command(*wire.command)
        pipe = self.client.pipeline(transaction=False)
        queue: _Commands = pipe
        for command in wire.commands:
            queue.execute_command(*command)
        return pipe.execute(raise_on_error=False)


class AsyncDriver:
    """Runs the same core generators on a ``redis.asyncio`` client."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self._commands: _Commands = client

    async def run(self, op: Op[T], key: str | None = None) -> T:
        with translate_errors(key):
            return await adrive(op, self._exec)

    async def _exec(self, request: Request) -> Any:
        if isinstance(request, Apply):
            return await request()
        return await adrive(_on_the_wire(request), self._send)

    async def _send(self, wire: _Line | _Pipeline) -> Any:
        if isinstance(wire, _Line):
            return await self._commands.execute_command(*wire.command)
        pipe = self.client.pipeline(transaction=False)
        queue: _Commands = pipe
        for command in wire.commands:
            queue.execute_command(*command)
        return await pipe.execute(raise_on_error=False)


class _Side:
    """How a backend reaches Redis: its ``client`` and the ``driver`` that
    runs the core generators on it."""

    prefix: str

    def __repr__(self) -> str:
        return f"<{type(self).__name__} prefix={self.prefix!r}>"


class SyncSide(_Side):
    """A blocking backend: ``redis.Redis`` or a URL, run by :class:`SyncDriver`."""

    client: redis.Redis
    driver: SyncDriver

    def _connect(self, client_or_url: Any) -> None:
        self.client = resolve_client(client_or_url)
        self.driver = SyncDriver(self.client)


class AsyncSide(_Side):
    """An asyncio backend: ``redis.asyncio.Redis`` or a URL, run by :class:`AsyncDriver`."""

    client: redis.asyncio.Redis
    driver: AsyncDriver

    def _connect(self, client_or_url: Any) -> None:
        self.client = resolve_async_client(client_or_url)
        self.driver = AsyncDriver(self.client)
