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
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_xsm import clients, conf
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
    "get_async_backend",
    "get_backend",
    "get_inbox",
    "get_log",
    "get_scanner",
    "get_store",
    "lock_strategy",
    "reset",
]


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
_async_backends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncBackend] = (
    weakref.WeakKeyDictionary()
)


def reset() -> None:
    """Drop the clients built so far (the next call rebuilds them).

    The embedded server is dropped too: its data is gone, which is what a
    test that changes settings expects.
    """
    global _backend
    with _lock:
        _backend = None
        _async_backends.clear()
    clients.reset_embedded()


conf.on_reset(reset)


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
                client = clients.url_client(s, is_async=False)
            elif source == "cache":
                assert s.cache_alias is not None
                client = clients.cache_client(s.cache_alias)
            else:
                client = clients.embedded_client(is_async=False)
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
                client = clients.url_client(s, is_async=True)
            elif source == "cache":
                assert s.cache_alias is not None
                client = clients.async_twin(clients.cache_client(s.cache_alias))
            else:
                client = clients.embedded_client(is_async=True)
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
                closer=clients.tie_to_loop(client),
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
