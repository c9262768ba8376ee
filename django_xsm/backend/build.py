"""The store, inbox and log a process uses, built once from ``settings.XSM``.

The Redis connection comes from ``REDIS_URL``, ``CACHE_ALIAS`` or
``SENTINEL``, else the embedded fakeredis when ``EMBEDDED`` allows it
(docs/settings.md, Connection); anything else is ``ImproperlyConfigured``
(:mod:`.readiness`), so a production process never silently keeps its
state in memory.

One sync client per process, shared by the store, the inbox and the log,
so a block opens in one round trip and commits in one
(docs/redis.md#round-trips); async views get the same on a
``redis.asyncio`` client, one per event loop (asyncio connections belong
to the loop that opened them). Everything is rebuilt when the settings
change (``conf.on_reset``). The registered machines are handed down by
``XsmConfig.ready()`` (:func:`use_machines`): this package never imports
the registry.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_xsm import conf
from django_xsm.brief import brief
from django_xsm.engine import Machine
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError
from django_xsm.persistence import (
    AdaptiveLock,
    AuditPlugin,
    DueTimerScanner,
    IdempotencyPlugin,
    OptimisticLock,
    PessimisticLock,
    Plugin,
)
from django_xsm.persistence.base import (
    AsyncStateStore,
    Codec,
    StateStore,
    system_clock_ms,
)
from django_xsm.persistence.locks import LockStrategy
from django_xsm.persistence.outbox import OutboxReader
from django_xsm.redis import (
    AsyncRedisInbox,
    AsyncRedisLog,
    AsyncRedisStore,
    RedisInbox,
    RedisLog,
    RedisStore,
)

from . import clients
from .readiness import require_usable
from .transitions import TransitionPlugin

#: What a block's ``plugins=`` holds.
BlockPlugin = IdempotencyPlugin | AuditPlugin | Plugin


class MachineDirectory(Protocol):
    """The registered machines, as the backend needs them (the registry)."""

    def by_machine_id(self) -> dict[str, Machine]: ...

    def name_for_machine_id(self, machine_id: str) -> str | None: ...

    def writers(self) -> tuple[Plugin, ...]: ...


@dataclass(frozen=True, slots=True)
class Backend:
    """What the sync side of a process talks to.

    ``source`` is ``"url"`` (one server or, with ``REDIS_CLUSTER``, a
    cluster), ``"cache"``, ``"sentinel"`` or ``"embedded"``;
    ``description`` is safe to show (never a host, port or password):
    ``"redis (XSM['REDIS_URL'])"``, ``"redis cluster (cache 'default')"``,
    ``"sentinel 'mymaster' (XSM['SENTINEL'])"``... ``plugins`` are the
    settings-driven plugins every block gets (idempotency, audit when
    enabled, transition signals and logging).
    """

    client: Any
    store: RedisStore
    inbox: RedisInbox
    log: RedisLog
    plugins: tuple[BlockPlugin, ...]
    source: str
    description: str


@dataclass(frozen=True, slots=True)
class AsyncBackend:
    """The asyncio twin of :class:`Backend`, bound to one event loop.

    Its client is closed when that loop shuts down
    (:func:`django_xsm.backend.clients.tie_to_loop`).
    """

    client: Any
    store: AsyncRedisStore
    inbox: AsyncRedisInbox
    log: AsyncRedisLog
    plugins: tuple[BlockPlugin, ...]
    source: str
    description: str
    closer: AsyncGenerator[None, None] | None = field(default=None, repr=False, compare=False)


_lock = threading.Lock()
_backend: Backend | None = None
_async_backends: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncBackend] = (
    weakref.WeakKeyDictionary()
)
_machines: MachineDirectory | None = None
#: The backend's stores as the protocols they implement: mypy checks here
#: that they keep the storage contract (persistence/base.py), their parts
#: (inbox, log, outbox) included.
CONTRACT: type[StateStore] = RedisStore
ASYNC_CONTRACT: type[AsyncStateStore] = AsyncRedisStore


# --- the clock ------------------------------------------------------------------------

#: The clock a test set with use_clock(); None: the wall clock.
_clock: Callable[[], int] | None = None


def now_ms() -> int:
    """django-xsm's time in this process, in epoch milliseconds: the wall
    clock unless a test set another with :func:`use_clock`. The stores
    hand it to blocks (deadlines armed, transition-log timestamps) and to
    the timer scanner (what is due); the outbox worker computes retry times
    on it."""
    clock = _clock
    return system_clock_ms() if clock is None else clock()


def use_clock(clock: Callable[[], int] | None) -> None:
    """Make ``clock`` (epoch milliseconds) django-xsm's time in this process;
    None: the wall clock again. While one is set the outbox worker also
    judges by it when a retry is due, instead of the Redis server's clock,
    so moving it brings retries back. For tests: ``xsm.advance()``
    (:mod:`django_xsm.testing`) moves one. Leases, idempotency receipts,
    lock and instance expiry keep the Redis server's clock."""
    global _clock
    if clock is not None and not callable(clock):
        raise ArgumentTypeError("clock", clock, expected="a callable returning epoch ms, or None")
    _clock = clock


def clock_is_set() -> bool:
    """Whether a test set django-xsm's clock (:func:`use_clock`)."""
    return _clock is not None


def use_machines(directory: MachineDirectory) -> None:
    """Make ``directory`` the registered machines of this process (called
    by ``XsmConfig.ready()`` with the registry)."""
    global _machines
    _machines = directory


def _directory() -> MachineDirectory:
    if _machines is None:
        raise ImproperlyConfigured(
            "No machine registry is loaded; add 'django_xsm' to INSTALLED_APPS"
        )
    return _machines


def _machine_name(machine_id: str) -> str | None:
    return None if _machines is None else _machines.name_for_machine_id(machine_id)


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


# --- building ----------------------------------------------------------------------


def _source(s: conf.XsmSettings) -> str:
    """Where the connection comes from (``require_usable`` allowed one)."""
    if s.redis_url:
        return "url"
    if s.cache_alias:
        return "cache"
    if s.sentinel is not None:
        return "sentinel"
    return "embedded"


def _describe(s: conf.XsmSettings, source: str, client: Any) -> str:
    """What the backend talks to, safe to show: the topology and the
    setting it came from, never an address or a password."""
    if source == "embedded":
        return "embedded fakeredis (in-process)"
    origins = {"url": "XSM['REDIS_URL']", "sentinel": "XSM['SENTINEL']"}
    origin = origins.get(source, f"cache {s.cache_alias!r}")
    service = clients.sentinel_service(client)
    if service is not None:
        return f"sentinel {service!r} ({origin})"
    if clients.is_cluster(client):
        return f"redis cluster ({origin})"
    return f"redis ({origin})"


def _client(s: conf.XsmSettings, source: str, *, is_async: bool) -> Any:
    if source == "url":
        return clients.url_client(s, is_async=is_async)
    if source == "sentinel":
        return clients.sentinel_client(s, is_async=is_async)
    if source == "cache":
        assert s.cache_alias is not None
        client = clients.cache_client(s.cache_alias)
        return clients.async_twin(client) if is_async else client
    return clients.embedded_client(is_async=is_async)


def get_codec() -> Codec | None:
    """The configured codec (``CODEC``, ``CODEC_KEYS``), None for compact
    JSON: what the backend's store, inbox, log and outbox encode with; for
    readers on clients of their own (the live stream)."""
    return _codec(conf.get_settings())


#: The codec ``CODEC_KEYS`` builds when ``CODEC`` names none.
DEFAULT_KEYED_CODEC = "django_xsm.persistence.FernetCodec"


def _codec(s: conf.XsmSettings) -> Codec | None:
    path = s.codec
    if path is None and s.codec_keys is not None:
        path = DEFAULT_KEYED_CODEC
    if path is None:
        return None
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"XSM['CODEC']: cannot import {path!r}: {exc}") from exc
    codec: Codec
    if s.codec_keys is not None:
        if not callable(found):
            raise ImproperlyConfigured(
                f"XSM['CODEC']: {path!r} is not a class or factory taking CODEC_KEYS"
            )
        # newest first: the first encrypts, every one decrypts
        codec = found(list(s.codec_keys))
    elif hasattr(found, "encode") and hasattr(found, "decode") and not isinstance(found, type):
        codec = found
    elif callable(found):
        codec = found()
    else:
        raise ImproperlyConfigured(f"XSM['CODEC']: {s.codec!r} is neither a codec nor a factory")
    return codec


_Store = TypeVar("_Store", RedisStore, AsyncRedisStore)


def _connect(*, is_async: bool) -> tuple[conf.XsmSettings, str, str, Any]:
    """The settings, the connection's source and description, and its client."""
    s = conf.get_settings()
    require_usable(s)
    source = _source(s)
    client = _client(s, source, is_async=is_async)
    return s, source, _describe(s, source, client), client


def _members(
    s: conf.XsmSettings, client: Any, kind: type[_Store]
) -> tuple[_Store, tuple[BlockPlugin, ...]]:
    """The store (with its inbox, log and outbox) and the plugins every
    block gets (idempotency, audit when enabled, transition signals/logs)."""
    assert s.prefix is not None  # require_usable refused a missing prefix
    store = kind(
        client,
        prefix=s.prefix,
        codec=_codec(s),  # one codec for everything holding user data
        max_snapshot_bytes=s.max_snapshot_bytes,
        ttl_s=s.instance_ttl_s,
        lock_ttl_ms=s.lock_ttl_ms,
        buckets=s.buckets,
        # DURABILITY: a commit (and a replayed idempotency claim) counts
        # once that many replicas acknowledged it.
        min_replicas=s.durability.min_replicas,
        replica_timeout_ms=s.durability.timeout_ms,
        log_maxlen=s.audit.maxlen,
    )
    # blocks and the timer scanner read the store's clock: django-xsm's
    store.clock = now_ms
    plugins: list[BlockPlugin] = [
        IdempotencyPlugin(ttl_s=s.idempotency.ttl_s, lease_s=s.idempotency.lease_s)
    ]
    if s.audit.enabled:
        plugins.append(AuditPlugin(redact=s.audit.redact))
    plugins.append(TransitionPlugin(_machine_name))
    return store, tuple(plugins)


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
            s, source, description, client = _connect(is_async=False)
            store, plugins = _members(s, client, RedisStore)
            _backend = Backend(client, store, store.inbox, store.log, plugins, source, description)
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
            s, source, description, client = _connect(is_async=True)
            store, plugins = _members(s, client, AsyncRedisStore)
            closer = clients.tie_to_loop(client)
            found = AsyncBackend(
                client, store, store.inbox, store.log, plugins, source, description, closer
            )
            _async_backends[loop] = found
        return found


def new_client(*, is_async: bool) -> Any:
    """A client of its own on the configured connection, not the process's
    shared one: for long blocking reads (the live stream's ``XREAD``) that
    would otherwise hold the pooled connections requests need. The caller
    owns it and closes it."""
    return _connect(is_async=is_async)[3]


def get_store() -> RedisStore:
    """Shortcut for ``get_backend().store``."""
    return get_backend().store


def get_inbox() -> RedisInbox:
    """Shortcut for ``get_backend().inbox``."""
    return get_backend().inbox


def get_log() -> RedisLog:
    """Shortcut for ``get_backend().log``."""
    return get_backend().log


def get_outbox() -> OutboxReader:
    """The outbox's delivery side (``xsm_run_outbox``, ``xsm_outbox``, the
    admin's Outbox page): the backend's store's own (``store.outbox``), so
    workers read the streams the commits of this process write."""
    return get_backend().store.outbox


def lock_strategy(lock: str | LockStrategy | None = None) -> LockStrategy:
    """``"adaptive"``, ``"optimistic"``, ``"pessimistic"``, a strategy, or
    None (the ``LOCK`` setting) as a lock strategy; the queueing lock (of
    ``"pessimistic"``, and of an ``"adaptive"`` retry) waits at most
    ``LOCK_TIMEOUT_S`` and holds for the store's ``LOCK_TTL_MS``."""
    if isinstance(lock, LockStrategy):
        return lock
    if lock is not None and not isinstance(lock, str):
        raise ArgumentTypeError(
            "lock", lock, expected="'adaptive', 'optimistic', 'pessimistic', a LockStrategy or None"
        )
    s = conf.get_settings()
    name = s.lock if lock is None else lock
    if name == "adaptive":
        return AdaptiveLock(timeout=s.lock_timeout_s)
    if name == "optimistic":
        return OptimisticLock()
    if name == "pessimistic":
        return PessimisticLock(timeout=s.lock_timeout_s)
    # a call's argument (XSM['LOCK'] was validated with the settings)
    raise InvalidConfigError(
        f"Unknown lock {brief(lock)}",
        path="lock",
        hint="use 'adaptive', 'optimistic', 'pessimistic', a LockStrategy or None (XSM['LOCK'])",
    )


def get_scanner(
    directory: MachineDirectory | None = None,
    *,
    lock: str | LockStrategy | None = None,
    key_prefix: str = "",
) -> DueTimerScanner:
    """A due-timer scanner over every machine of ``directory`` (the
    registry; None: the one the app's start-up handed over), with the same
    plugins as views (timer fires are audited, signalled and logged with
    the actor ``xsm:timer``), the directory's model projection writers (a
    fire moves the row its key names) and the ``TIMERS`` retry policy;
    ``key_prefix`` limits it to keys starting with that text (literally)."""
    backend = get_backend()
    timers = conf.get_settings().timers
    found = directory if directory is not None else _directory()
    machines: Mapping[str, Machine] = found.by_machine_id()
    return DueTimerScanner(
        backend.store,
        machines,
        plugins=(*found.writers(), *backend.plugins),
        lock=lock_strategy(lock),
        max_attempts=timers.max_attempts,
        backoff_s=timers.backoff_s,
        max_backoff_s=timers.max_backoff_s,
        key_prefix=key_prefix,
    )
