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
from collections.abc import Generator, Sequence
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio
from redis.exceptions import NoScriptError

from django_xsm.exceptions import InvalidConfigError

from . import scripts
from .core import Cmd, Many
from .errors import translate_errors
from .ops import Call

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AsyncDriver",
    "SyncDriver",
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


def _evalsha(call: Call) -> tuple[Any, ...]:
    return (SHAS[call.script], len(call.keys), *call.keys, *call.args)


def _eval(call: Call) -> tuple[Any, ...]:
    return (SOURCES[call.script], len(call.keys), *call.keys, *call.args)


def _missing(replies: list[Any]) -> list[int]:
    """Positions of pipelined script calls that met an empty script cache."""
    return [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]


def _checked(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


# NOSCRIPT (after SCRIPT FLUSH, a restart or a failover) means the script did
# not run. The recovery is EVAL with the source, which runs the script and
# caches it in one step: "SCRIPT LOAD, then EVALSHA again" would fail when
# another client flushes in between. In a pipeline only the calls that met
# NOSCRIPT are sent again; everything else already ran and is not repeated.
# https://redis.io/docs/latest/develop/interact/programmability/eval-intro/


class SyncDriver:
    """Runs core generators on a blocking client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def run(self, op: Generator[Any, Any, Any], key: str | None = None) -> Any:
        with translate_errors(key):
            try:
                request = op.send(None)
                while True:
                    request = op.send(self._exec(request))
            except StopIteration as stop:
                return stop.value

    def _exec(self, request: Any) -> Any:
        if isinstance(request, Call):
            try:
                return self.client.evalsha(*_evalsha(request))
            except NoScriptError:
                return self.client.eval(*_eval(request))
        if isinstance(request, Cmd):
            return self.client.execute_command(request.name, *request.args)
        assert isinstance(request, Many)
        return self._pipeline(request.requests)

    def _send(self, requests: Sequence[Call | Cmd], *, by_source: bool) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for r in requests:
            if isinstance(r, Call):
                pipe.execute_command(
                    *(("EVAL", *_eval(r)) if by_source else ("EVALSHA", *_evalsha(r)))
                )
            else:
                pipe.execute_command(r.name, *r.args)
        return list(pipe.execute(raise_on_error=False))

    def _pipeline(self, requests: tuple[Call | Cmd, ...]) -> list[Any]:
        if not requests:
            return []
        replies = self._send(requests, by_source=False)
        missing = _missing(replies)
        if missing:
            again = self._send([requests[i] for i in missing], by_source=True)
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return _checked(replies)


class AsyncDriver:
    """Runs the same core generators on a ``redis.asyncio`` client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def run(self, op: Generator[Any, Any, Any], key: str | None = None) -> Any:
        with translate_errors(key):
            try:
                request = op.send(None)
                while True:
                    request = op.send(await self._exec(request))
            except StopIteration as stop:
                return stop.value

    async def _exec(self, request: Any) -> Any:
        if isinstance(request, Call):
            try:
                return await self.client.evalsha(*_evalsha(request))
            except NoScriptError:
                return await self.client.eval(*_eval(request))
        if isinstance(request, Cmd):
            return await self.client.execute_command(request.name, *request.args)
        assert isinstance(request, Many)
        return await self._pipeline(request.requests)

    async def _send(self, requests: Sequence[Call | Cmd], *, by_source: bool) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for r in requests:
            if isinstance(r, Call):
                pipe.execute_command(
                    *(("EVAL", *_eval(r)) if by_source else ("EVALSHA", *_evalsha(r)))
                )
            else:
                pipe.execute_command(r.name, *r.args)
        return list(await pipe.execute(raise_on_error=False))

    async def _pipeline(self, requests: tuple[Call | Cmd, ...]) -> list[Any]:
        if not requests:
            return []
        replies = await self._send(requests, by_source=False)
        missing = _missing(replies)
        if missing:
            again = await self._send([requests[i] for i in missing], by_source=True)
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return _checked(replies)
