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
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import NoScriptError

from django_xsm.exceptions import InvalidConfigError

from . import scripts
from .calls import Call
from .durability import Replicated
from .errors import translate_errors
from .requests import Cmd, Many, Request

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AsyncDriver",
    "AsyncSide",
    "RedisSide",
    "SyncDriver",
    "SyncSide",
    "is_cluster",
    "resolve_async_client",
    "resolve_client",
    "same_server",
    "socket_timeout_of",
]

DEFAULT_TIMEOUT_S = 5.0
_URL_TIMEOUTS: dict[str, Any] = {
    "socket_timeout": DEFAULT_TIMEOUT_S,
    "socket_connect_timeout": DEFAULT_TIMEOUT_S,
}
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


def is_cluster(client: object) -> bool:
    """True for redis-py's Redis Cluster clients (blocking or asyncio)."""
    return isinstance(client, redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster)


def _connection_kwargs(client: Any) -> dict[str, Any]:
    if is_cluster(client):
        return dict(client.get_connection_kwargs())
    return dict(getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}))


def socket_timeout_of(client: object) -> float | None:
    """The read timeout (s) of ``client``'s connections, None when it has none
    (a blocking command must return before it, or the read fails)."""
    value = _connection_kwargs(client).get("socket_timeout")
    return float(value) if isinstance(value, int | float) and value > 0 else None


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
    if _connection_kwargs(client).get("decode_responses"):
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
                client = redis.Redis.from_url(client_or_url, **_URL_TIMEOUTS)
                _url_clients[client_or_url] = client
        return _checked_client(client, want_async=False)
    return _checked_client(client_or_url, want_async=False)


def resolve_async_client(client_or_url: Any) -> Any:
    """An asyncio client: the one given, or a new one from the URL."""
    if isinstance(client_or_url, str):
        _check_url(client_or_url)
        client_or_url = redis.asyncio.Redis.from_url(client_or_url, **_URL_TIMEOUTS)
    return _checked_client(client_or_url, want_async=True)


def same_server(a: Any, b: Any) -> bool:
    """True when two clients reach the same data: the same server and
    database, the same Redis Cluster, or the same Sentinel service."""
    if a is b:
        return True
    if is_cluster(a) or is_cluster(b):
        # A node belongs to one cluster: two clients that know a common
        # node (host:port) talk to the same cluster.
        if not (is_cluster(a) and is_cluster(b)):
            return False
        names = {n.name for n in a.get_nodes()}
        return _user(a) == _user(b) and any(n.name in names for n in b.get_nodes())
    pa, pb = getattr(a, "connection_pool", None), getattr(b, "connection_pool", None)
    if pa is None or pb is None:
        return False
    if pa is pb:
        return True
    if type(pa) is not type(pb):
        return False
    ka, kb = pa.connection_kwargs, pb.connection_kwargs
    if hasattr(pa, "service_name"):
        # Sentinel pools: the address is whatever primary the sentinels name.
        same_db = ka.get("db", 0) == kb.get("db", 0) and _user(a) == _user(b)
        return same_db and pa.service_name == pb.service_name and _sentinels(pa) == _sentinels(pb)
    keys = ("host", "port", "db", "path", "username", "server")
    return all(ka.get(k) == kb.get(k) for k in keys)


def _user(client: Any) -> Any:
    return _connection_kwargs(client).get("username")


def _sentinels(pool: Any) -> frozenset[tuple[Any, Any]]:
    """The (host, port) of every sentinel a Sentinel pool asks."""
    found = set()
    for sentinel in getattr(pool.sentinel_manager, "sentinels", ()):
        kw = sentinel.connection_pool.connection_kwargs
        found.add((kw.get("host"), kw.get("port")))
    return frozenset(found)


def _command(request: Call | Cmd, *, by_source: bool = False) -> tuple[Any, ...]:
    """The command line of one request: a script by SHA (or by source)."""
    if isinstance(request, Cmd):
        return (request.name, *request.args)
    if by_source:
        return ("EVAL", SOURCES[request.script], len(request.keys), *request.keys, *request.args)
    return ("EVALSHA", SHAS[request.script], len(request.keys), *request.keys, *request.args)


@dataclass(frozen=True, slots=True)
class _Pipeline:
    """Commands in one pipeline; replies come back with errors in place.
    ``pin``: a key whose node must run them all on one connection (a
    replicated write: WAIT only counts what its own connection wrote)."""

    commands: tuple[tuple[Any, ...], ...]
    pin: str | None = None


# NOSCRIPT (after SCRIPT FLUSH, a restart or a failover) means the script did
# not run. The recovery is EVAL with the source, which runs the script and
# caches it in one step: "SCRIPT LOAD, then EVALSHA again" would fail when
# another client flushes in between. In a pipeline only the calls that met
# NOSCRIPT are sent again; everything else already ran and is not repeated.
# https://redis.io/docs/latest/develop/interact/programmability/eval-intro/


def _pipelined(request: Many | Replicated) -> Generator[_Pipeline, list[Any], Any]:
    """The pipelines one ``Many`` or ``Replicated`` request sends (a second
    one only for the calls that met NOSCRIPT), and its result. Replies come
    back with errors in place, so nothing is thrown into this generator."""
    if isinstance(request, Replicated):
        wait = ("WAIT", request.min_replicas, request.timeout_ms)
        sent = request.request
        replies = yield _Pipeline((_command(sent), wait), pin=request.pin)
        if isinstance(replies[0], NoScriptError):
            replies = yield _Pipeline((_command(sent, by_source=True), wait), pin=request.pin)
        _raise_first_error(replies)
        return replies[0], int(replies[1])
    requests = request.requests
    if not requests:
        return []
    replies = list((yield _Pipeline(tuple(_command(r) for r in requests))))
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        again = yield _Pipeline(tuple(_command(requests[i], by_source=True) for i in missing))
        for i, reply in zip(missing, again, strict=True):
            replies[i] = reply
    _raise_first_error(replies)
    return replies


def _raise_first_error(replies: list[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


_DONE = object()


class _Stepper:
    """One operation advanced a request at a time (both drivers' loop):
    :meth:`next` sends in :attr:`reply`, or throws in :attr:`error` at the
    ``yield`` that asked, and returns the next request, or ``_DONE`` once
    the operation returned (its value in :attr:`result`)."""

    __slots__ = ("error", "op", "reply", "result")

    def __init__(self, op: Generator[Any, Any, Any]) -> None:
        self.op = op
        self.reply: Any = None
        self.error: BaseException | None = None
        self.result: Any = None

    def next(self) -> Any:
        error, self.error = self.error, None
        try:
            request = self.op.send(self.reply) if error is None else self.op.throw(error)
        except StopIteration as stop:
            self.result = stop.value
            return _DONE
        self.reply = None
        return request


class _Commands(Protocol):
    """``execute_command`` as redis-py defines it (it leaves it unannotated)."""

    def execute_command(self, *args: Any) -> Any: ...


def _queued(owner: Any, wire: _Pipeline) -> Any:
    """A pipeline of ``owner`` holding the commands of ``wire``, not yet sent."""
    pipe = owner.pipeline(transaction=False)
    queue: _Commands = pipe
    for command in wire.commands:
        queue.execute_command(*command)
    return pipe


class SyncDriver:
    """Runs store operations (generators of :data:`~.requests.Request`) on a
    blocking client: the one loop between a block, or any operation, and
    the socket. A request that fails is thrown back into the operation at
    the ``yield`` that asked for it, so the operation cleans up after itself;
    what escapes is translated (:func:`~.errors.translate_errors`)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._commands: _Commands = client
        self.cluster = is_cluster(client)

    def run(self, op: Generator[Any, Any, T], key: str | None = None) -> T:
        with translate_errors(key, cluster=self.cluster):
            step = _Stepper(op)
            while (request := step.next()) is not _DONE:
                try:
                    step.reply = self._send(request)
                except BaseException as exc:
                    step.error = exc
            result: T = step.result
            return result

    def _send(self, request: Request) -> Any:
        if isinstance(request, Call | Cmd):
            try:
                return self._commands.execute_command(*_command(request))
            except NoScriptError:  # a Call only: plain commands never meet NOSCRIPT
                return self._commands.execute_command(*_command(request, by_source=True))
        step = _Stepper(_pipelined(request))
        while (pipeline := step.next()) is not _DONE:
            step.reply = self._pipeline(pipeline)
        return step.result

    def _pipeline(self, wire: _Pipeline) -> list[Any]:
        owner: Any = self.client
        if wire.pin is not None and self.cluster:
            owner = owner.get_node_from_key(wire.pin).redis_connection
        replies: list[Any] = _queued(owner, wire).execute(raise_on_error=False)
        return replies


class AsyncDriver:
    """:class:`SyncDriver` on a ``redis.asyncio`` client: the same loop, awaited."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self._commands: _Commands = client
        self.cluster = is_cluster(client)
        # node name -> a plain client on that node (pinned pipelines)
        self._nodes: dict[str, redis.asyncio.Redis] = {}

    async def run(self, op: Generator[Any, Any, T], key: str | None = None) -> T:
        with translate_errors(key, cluster=self.cluster):
            step = _Stepper(op)
            while (request := step.next()) is not _DONE:
                try:
                    step.reply = await self._send(request)
                except BaseException as exc:
                    step.error = exc
            result: T = step.result
            return result

    async def _send(self, request: Request) -> Any:
        if isinstance(request, Call | Cmd):
            try:
                return await self._commands.execute_command(*_command(request))
            except NoScriptError:  # a Call only: plain commands never meet NOSCRIPT
                return await self._commands.execute_command(*_command(request, by_source=True))
        step = _Stepper(_pipelined(request))
        while (pipeline := step.next()) is not _DONE:
            step.reply = await self._pipeline(pipeline)
        return step.result

    async def _pipeline(self, wire: _Pipeline) -> list[Any]:
        owner: Any = self.client
        if wire.pin is not None and self.cluster:
            owner = await self._node_client(wire.pin)
        replies: list[Any] = await _queued(owner, wire).execute(raise_on_error=False)
        return replies

    async def aclose_nodes(self) -> None:
        """Close the per-node clients of pinned pipelines."""
        nodes, self._nodes = self._nodes, {}
        for client in nodes.values():
            await client.aclose()

    async def _node_client(self, key: str) -> redis.asyncio.Redis:
        """A plain asyncio client on the node owning ``key``'s slot (the
        asyncio cluster client has no per-node client to lend)."""
        cluster: Any = self.client
        await cluster.initialize()
        node = cluster.get_node_from_key(key)
        found = self._nodes.get(node.name)
        if found is None:
            pool = redis.asyncio.ConnectionPool(
                connection_class=node.connection_class, **node.connection_kwargs
            )
            found = self._nodes[node.name] = redis.asyncio.Redis.from_pool(pool)
        return found


class RedisSide:
    """How a backend reaches Redis: its ``client`` and the ``driver`` that
    runs the core generators on it."""

    prefix: str
    client: Any
    driver: SyncDriver | AsyncDriver

    def composed(self, op: Generator[Any, Any, T], key: str | None) -> Generator[Any, Any, T]:
        """``op`` for another generator to ``yield from`` (a block's open,
        claim or commit), its errors translated as the driver's ``run``
        translates them: the composing generator sees the documented
        ``XsmError`` at the ``yield from``, never a redis-py error."""
        with translate_errors(key, cluster=self.driver.cluster):
            return (yield from op)

    def _connect(self, client_or_url: Any) -> None:
        """Set ``client`` and ``driver`` (blocking or asyncio)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} prefix={self.prefix!r}>"


class SyncSide(RedisSide):
    """A blocking backend: ``redis.Redis`` or a URL, run by :class:`SyncDriver`."""

    client: redis.Redis
    driver: SyncDriver

    def _connect(self, client_or_url: Any) -> None:
        self.client = resolve_client(client_or_url)
        self.driver = SyncDriver(self.client)


class AsyncSide(RedisSide):
    """An asyncio backend: ``redis.asyncio.Redis`` or a URL, run by :class:`AsyncDriver`."""

    client: redis.asyncio.Redis
    driver: AsyncDriver

    def _connect(self, client_or_url: Any) -> None:
        self.client = resolve_async_client(client_or_url)
        self.driver = AsyncDriver(self.client)
