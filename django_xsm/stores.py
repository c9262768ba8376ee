"""The store, inbox and log a process uses, built once from ``settings.XSM``.

::

    from django_xsm.stores import get_backend
    backend = get_backend()        # .store, .inbox, .log, .plugins, .client
    backend.store.health()

Where the Redis connection comes from, in order:

* ``REDIS_URL`` (``redis://``, ``rediss://`` for TLS, ``unix://``), with
  ``SOCKET_TIMEOUT_S`` for socket and connect timeouts and ``REDIS_OPTIONS``
  passed to ``from_url``;
* ``CACHE_ALIAS``: the write client of a django-redis cache
  (``get_redis_connection``), so the app shares that pool;
* otherwise the embedded default: an in-process fakeredis (Lua through
  lupa), when ``EMBEDDED`` is True or unset with ``DEBUG=True``. It is logged
  once per process; every other case is ``ImproperlyConfigured`` (and
  ``xsm.E008`` in ``manage.py check``), so a production process never
  silently keeps its state in memory.

Guarantees: one sync client per process, shared by the store, the inbox
and the log with one prefix, so a block opens in one round trip and
commits in one (DESIGN §4). Async views get the same objects on a
``redis.asyncio`` client, one per event loop (asyncio connections belong to
the loop that opened them; an ASGI server runs one loop per process).
Everything is rebuilt when the settings change (``conf.on_reset``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_xsm import conf
from django_xsm.persistence import (
    AuditPlugin,
    DueTimerScanner,
    IdempotencyPlugin,
    OptimisticLock,
    PessimisticLock,
)
from django_xsm.persistence.base import validate_prefix
from django_xsm.persistence.locks import LockStrategy
from django_xsm.redis import (
    AsyncRedisInbox,
    AsyncRedisLog,
    AsyncRedisStore,
    RedisInbox,
    RedisLog,
    RedisStore,
)

__all__ = [
    "AsyncBackend",
    "Backend",
    "cache_alias_problem",
    "get_async_backend",
    "get_backend",
    "get_inbox",
    "get_log",
    "get_scanner",
    "get_store",
    "lock_strategy",
    "reset",
]

logger = logging.getLogger("django_xsm")

# Connection options that mean the same for redis.Redis and redis.asyncio;
# everything else in a sync pool's kwargs (parsers, retry objects, event
# handlers) has a sync-only type and must not be copied to an async pool.
_PORTABLE_OPTIONS = (
    "host",
    "port",
    "db",
    "path",
    "username",
    "password",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "socket_keepalive_options",
    "retry_on_timeout",
    "encoding",
    "encoding_errors",
    "client_name",
    "health_check_interval",
    "protocol",
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_data",
    "ssl_check_hostname",
    "ssl_min_version",
    "ssl_ciphers",
    # fakeredis' connection classes
    "server",
    "version",
    "server_type",
    "lua_modules",
)


@dataclass(frozen=True, slots=True)
class Backend:
    """What the sync side of a process talks to.

    ``source`` is ``"url"``, ``"cache"`` or ``"embedded"``; ``description``
    is safe to show (never a host, port or password). ``plugins`` are the
    settings-driven plugins every block gets (idempotency, audit when
    enabled, transition signals and logging).
    """

    client: Any
    store: RedisStore
    inbox: RedisInbox
    log: RedisLog
    plugins: tuple[Any, ...]
    source: str
    description: str


@dataclass(frozen=True, slots=True)
class AsyncBackend:
    """The asyncio twin of :class:`Backend`, bound to one event loop.

    Its client is closed when that loop shuts down (see :func:`_tie_to_loop`).
    """

    client: Any
    store: AsyncRedisStore
    inbox: AsyncRedisInbox
    log: AsyncRedisLog
    plugins: tuple[Any, ...]
    source: str
    description: str
    closer: Any = field(default=None, repr=False, compare=False)


_lock = threading.Lock()
_backend: Backend | None = None
_embedded_server: Any = None
_async_backends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncBackend] = (
    weakref.WeakKeyDictionary()
)
_embedded_logged = False


def reset() -> None:
    """Drop the clients built so far (the next call rebuilds them).

    The embedded server is dropped too: its data is gone, which is what a
    test that changes settings expects.
    """
    global _backend, _embedded_server
    with _lock:
        _backend = None
        _embedded_server = None
        _async_backends.clear()


conf.on_reset(reset)


# --- clients ---------------------------------------------------------------------


def _embedded(*, is_async: bool) -> Any:
    global _embedded_server, _embedded_logged
    try:
        import fakeredis
        import lupa  # noqa: F401  (fakeredis runs the Lua scripts through it)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"The embedded XSM store needs fakeredis and lupa ({exc.name} is not installed)",
        ) from exc
    if _embedded_server is None:
        _embedded_server = fakeredis.FakeServer()
        if not _embedded_logged:
            _embedded_logged = True
            logger.warning(
                "django-xsm is using an in-process fakeredis store (no XSM REDIS_URL or "
                "CACHE_ALIAS): state lives in this process only and is lost on restart; "
                "set XSM['REDIS_URL'] to share it between workers"
            )
    if is_async:
        return fakeredis.FakeAsyncRedis(server=_embedded_server)
    return fakeredis.FakeRedis(server=_embedded_server)


def cache_alias_problem(alias: str) -> str | None:
    """Why ``alias`` cannot serve as the XSM connection, or None when it can
    (used by the system checks; touches no network)."""
    from django.conf import settings

    caches = getattr(settings, "CACHES", {}) or {}
    if alias not in caches:
        known = ", ".join(sorted(caches)) or "none"
        return f"there is no cache {alias!r} in CACHES (defined: {known})"
    backend = str(caches[alias].get("BACKEND", ""))
    if not backend.startswith("django_redis."):
        return (
            f"cache {alias!r} uses {backend or 'no BACKEND'}, not django-redis; "
            "XSM needs a Redis server (use django_redis.cache.RedisCache or REDIS_URL)"
        )
    client_class = str((caches[alias].get("OPTIONS") or {}).get("CLIENT_CLASS", ""))
    if "Shard" in client_class:
        return (
            f"cache {alias!r} is sharded ({client_class}); XSM commits one instance "
            "in one script on one server, so it needs an unsharded alias or REDIS_URL"
        )
    try:
        import django_redis  # noqa: F401
    except ImportError:
        return "django-redis is not installed (pip install django-xsm[django-redis])"
    return None


def _cache_client(alias: str) -> Any:
    problem = cache_alias_problem(alias)
    if problem:
        raise ImproperlyConfigured(f"XSM['CACHE_ALIAS']: {problem}")
    from django_redis import get_redis_connection

    try:
        return get_redis_connection(alias, write=True)
    except NotImplementedError as exc:
        raise ImproperlyConfigured(
            f"XSM['CACHE_ALIAS']: cache {alias!r} cannot hand out a Redis client "
            "(sharded or not django-redis); use REDIS_URL"
        ) from exc


def _async_twin(client: Any) -> Any:
    """An asyncio client on the same server as the sync ``client``."""
    import redis.asyncio
    import redis.connection

    pool = client.connection_pool
    cls = pool.connection_class
    module = getattr(cls, "__module__", "")
    if module.startswith("fakeredis"):
        import fakeredis

        async_cls: Any = fakeredis.FakeAsyncRedisConnection
    elif issubclass(cls, redis.connection.SSLConnection):
        async_cls = redis.asyncio.SSLConnection
    elif issubclass(cls, redis.connection.UnixDomainSocketConnection):
        async_cls = redis.asyncio.UnixDomainSocketConnection
    elif issubclass(cls, redis.connection.Connection):
        async_cls = redis.asyncio.Connection
    else:
        raise ImproperlyConfigured(
            f"XSM cannot derive an asyncio client from the cache's {cls.__name__} "
            "connections; set XSM['REDIS_URL'] for async views"
        )
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k in _PORTABLE_OPTIONS}
    async_pool = redis.asyncio.ConnectionPool(connection_class=async_cls, **kwargs)
    # from_pool: the client owns the pool, so aclose() closes its connections.
    return redis.asyncio.Redis.from_pool(async_pool)


def _url_client(s: conf.XsmSettings, *, is_async: bool) -> Any:
    import redis
    import redis.asyncio

    assert s.redis_url is not None
    options: dict[str, Any] = {
        "socket_timeout": s.socket_timeout_s,
        "socket_connect_timeout": s.socket_timeout_s,
        **s.redis_options,
    }
    factory = redis.asyncio.Redis if is_async else redis.Redis
    try:
        return factory.from_url(s.redis_url, **options)
    except (ValueError, TypeError) as exc:
        # redis-py's message may quote the URL (and its password): name the
        # setting only.
        raise ImproperlyConfigured(
            f"XSM['REDIS_URL'] or XSM['REDIS_OPTIONS'] is invalid ({type(exc).__name__})",
        ) from exc


def _source(s: conf.XsmSettings) -> tuple[str, str]:
    if s.redis_url:
        return "url", "redis (XSM['REDIS_URL'])"
    if s.cache_alias:
        return "cache", f"redis (cache {s.cache_alias!r})"
    return "embedded", "embedded fakeredis (in-process)"


def _check_ready(s: conf.XsmSettings) -> None:
    if s.redis_url and s.cache_alias:
        raise ImproperlyConfigured(
            "XSM sets both REDIS_URL and CACHE_ALIAS; keep one",
        )
    if s.prefix is None:
        raise ImproperlyConfigured(
            "XSM['PREFIX'] is required (one namespace per application, e.g. 'shop')",
        )
    try:
        validate_prefix(s.prefix)
    except ValueError as exc:
        raise ImproperlyConfigured(f"XSM['PREFIX']: {exc}") from exc
    if not (s.redis_url or s.cache_alias or s.uses_embedded):
        raise ImproperlyConfigured(
            "XSM has no Redis configured: set XSM['REDIS_URL'] or XSM['CACHE_ALIAS'] "
            "(the in-process fakeredis default only runs with DEBUG=True or "
            "XSM['EMBEDDED']=True)",
        )


def _codec(s: conf.XsmSettings) -> Any:
    if s.codec is None:
        return None
    try:
        found = import_string(s.codec)
    except ImportError as exc:
        raise ImproperlyConfigured(f"XSM['CODEC']: cannot import {s.codec!r}: {exc}") from exc
    if hasattr(found, "encode") and hasattr(found, "decode") and not isinstance(found, type):
        return found
    if callable(found):
        return found()
    raise ImproperlyConfigured(f"XSM['CODEC']: {s.codec!r} is neither a codec nor a factory")


def _plugins(s: conf.XsmSettings, inbox: Any, log: Any) -> tuple[Any, ...]:
    from django_xsm.transitions import TransitionPlugin

    plugins: list[Any] = [
        IdempotencyPlugin(inbox, ttl_s=s.idempotency.ttl_s, lease_s=s.idempotency.lease_s)
    ]
    if s.audit.enabled:
        plugins.append(AuditPlugin(log, redact=s.audit.redact))
    plugins.append(TransitionPlugin())
    return tuple(plugins)


def _store_kwargs(s: conf.XsmSettings) -> dict[str, Any]:
    return {
        "prefix": s.prefix,
        "codec": _codec(s),
        "max_snapshot_bytes": s.max_snapshot_bytes,
        "ttl_s": s.instance_ttl_s,
        "lock_ttl_ms": s.lock_ttl_ms,
        "buckets": s.buckets,
    }


async def _close_at_loop_end(client: Any) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.aclose()


def _tie_to_loop(client: Any) -> AsyncGenerator[None, None]:
    """Close ``client`` when the running loop shuts down.

    asyncio connections cannot outlive their loop, and under WSGI Django
    runs each async view on a loop of its own (asgiref's ``async_to_sync``
    uses ``asyncio.run``). ``asyncio.run``, ``asyncio.Runner`` and ASGI
    servers call ``loop.shutdown_asyncgens()`` before closing a loop, which
    finalises every async generator started on it: a generator parked at its
    ``yield`` with ``aclose()`` in its ``finally`` therefore closes the
    client's connections on the loop that owns them, instead of leaking them
    to the garbage collector.
    """
    closer = _close_at_loop_end(client)
    # Calling asend() runs the loop's firstiter hook, which registers the
    # generator with the running loop; stepping the returned awaitable once
    # parks the generator at its yield (it awaits nothing before it).
    step = closer.asend(None)
    try:
        step.send(None)
    except StopIteration:
        pass
    return closer


# --- public accessors ----------------------------------------------------------------


def get_backend() -> Backend:
    """The process-wide sync backend (built on first use, thread-safe).

    Raises ``ImproperlyConfigured`` when the settings do not name a usable
    connection; never raises for an unreachable server (that surfaces as
    ``StoreUnavailableError`` on use).
    """
    global _backend
    found = _backend
    if found is not None:
        return found
    with _lock:
        if _backend is None:
            s = conf.get_settings()
            _check_ready(s)
            source, description = _source(s)
            if source == "url":
                client = _url_client(s, is_async=False)
            elif source == "cache":
                assert s.cache_alias is not None
                client = _cache_client(s.cache_alias)
            else:
                client = _embedded(is_async=False)
            assert s.prefix is not None
            store = RedisStore(client, **_store_kwargs(s))
            inbox = RedisInbox(client, prefix=s.prefix, buckets=s.buckets)
            log = RedisLog(client, prefix=s.prefix, maxlen=s.audit.maxlen, buckets=s.buckets)
            _backend = Backend(
                client, store, inbox, log, _plugins(s, inbox, log), source, description
            )
        return _backend


def get_async_backend() -> AsyncBackend:
    """The asyncio backend of the running event loop (one per loop).

    Must be called from a coroutine. Same settings, prefix and guarantees
    as :func:`get_backend`.
    """
    loop = asyncio.get_running_loop()
    found = _async_backends.get(loop)
    if found is not None:
        return found
    with _lock:
        found = _async_backends.get(loop)
        if found is None:
            s = conf.get_settings()
            _check_ready(s)
            source, description = _source(s)
            if source == "url":
                client = _url_client(s, is_async=True)
            elif source == "cache":
                assert s.cache_alias is not None
                client = _async_twin(_cache_client(s.cache_alias))
            else:
                client = _embedded(is_async=True)
            assert s.prefix is not None
            store = AsyncRedisStore(client, **_store_kwargs(s))
            inbox = AsyncRedisInbox(client, prefix=s.prefix, buckets=s.buckets)
            log = AsyncRedisLog(client, prefix=s.prefix, maxlen=s.audit.maxlen, buckets=s.buckets)
            found = AsyncBackend(
                client,
                store,
                inbox,
                log,
                _plugins(s, inbox, log),
                source,
                description,
                closer=_tie_to_loop(client),
            )
            _async_backends[loop] = found
        return found


def get_store() -> RedisStore:
    """Shortcut for ``get_backend().store``."""
    return get_backend().store


def get_inbox() -> RedisInbox:
    """Shortcut for ``get_backend().inbox``."""
    return get_backend().inbox


def get_log() -> RedisLog:
    """Shortcut for ``get_backend().log``."""
    return get_backend().log


def lock_strategy(lock: str | LockStrategy | None = None) -> LockStrategy:
    """``"optimistic"``, ``"pessimistic"``, a strategy, or None (the
    ``LOCK`` setting) as a lock strategy; pessimistic locks wait at most
    ``LOCK_TIMEOUT_S`` and hold for the store's ``LOCK_TTL_MS``."""
    if isinstance(lock, LockStrategy):
        return lock
    s = conf.get_settings()
    name = s.lock if lock is None else lock
    if name == "optimistic":
        return OptimisticLock()
    if name == "pessimistic":
        return PessimisticLock(timeout=s.lock_timeout_s)
    raise ImproperlyConfigured(
        f"Unknown lock {lock!r}: use 'optimistic', 'pessimistic' or a LockStrategy",
    )


def get_scanner(*, lock: str | LockStrategy | None = None) -> DueTimerScanner:
    """A due-timer scanner over every registered machine, with the same
    plugins as views (timer fires are audited, signalled and logged with
    the actor ``xsm:timer``) and the ``TIMERS`` retry policy."""
    from django_xsm.registry import machines

    backend = get_backend()
    timers = conf.get_settings().timers
    return DueTimerScanner(
        backend.store,
        machines.by_machine_id(),
        plugins=backend.plugins,
        lock=lock_strategy(lock),
        max_attempts=timers.max_attempts,
        backoff_s=timers.backoff_s,
        max_backoff_s=timers.max_backoff_s,
    )
