"""The ``XSM`` setting's defaults and its parsed, typed form (``XsmSettings``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULTS",
    "REMOVED",
    "SAFE_METHODS",
    "SENTINEL_DEFAULTS",
    "WATCHED",
    "Admin",
    "Audit",
    "Diagram",
    "Durability",
    "Idempotency",
    "Outbox",
    "Sentinel",
    "Stream",
    "Timers",
    "XsmSettings",
]

#: The documented defaults (docs/settings.md). Nested dicts are merged key by
#: key with what the project sets, so ``"AUDIT": {"MAXLEN": 1000}`` keeps
#: ``ENABLED`` and ``REDACT``.
DEFAULTS: dict[str, Any] = {
    "REDIS_URL": None,
    "REDIS_OPTIONS": {},
    "REDIS_CLUSTER": False,
    "CACHE_ALIAS": None,
    "SENTINEL": None,
    "EMBEDDED": None,
    "PREFIX": None,
    "MACHINES": {},
    "LOCK": "adaptive",
    "LOCK_TTL_MS": 30_000,
    "LOCK_TIMEOUT_S": 1.0,
    "CONFLICT_RETRIES": 3,
    "SOCKET_TIMEOUT_S": 5.0,
    "MAX_SNAPSHOT_BYTES": 1024 * 1024,
    "MAX_PAYLOAD_BYTES": 64 * 1024,
    "INSTANCE_TTL_S": None,
    "BUCKETS": None,
    "CODEC": None,
    "CODEC_KEYS": None,
    "ACTOR": None,
    "REQUEST_ID_HEADER": "X-Request-ID",
    "REQUEST_TIMEOUT_S": None,
    "IDEMPOTENCY": {
        "HEADER": "Idempotency-Key",
        "REQUIRED": ["POST"],
        "TTL_S": 86_400,
        "LEASE_S": None,
        "MAX_RESPONSE_BYTES": 64 * 1024,
        "PRINCIPAL": None,
    },
    "AUDIT": {
        "ENABLED": True,
        "MAXLEN": None,
        "REDACT": [],
    },
    "TIMERS": {
        "MAX_ATTEMPTS": 10,
        "BACKOFF_S": 1.0,
        "MAX_BACKOFF_S": 300.0,
    },
    "OUTBOX": {
        "HANDLERS": {},
        "MAX_ATTEMPTS": 10,
        "BACKOFF_S": 1.0,
        "MAX_BACKOFF_S": 300.0,
        "VISIBILITY_TIMEOUT_S": 60,
    },
    "DURABILITY": {
        "MIN_REPLICAS": 0,
        "TIMEOUT_MS": 100,
    },
    "DIAGRAM": {
        "RENDERER": "auto",
    },
    "ADMIN": {
        "BULK_MAX": 100,
    },
    "STREAM": {
        "HEARTBEAT_S": 15,
        "MAX_SECONDS": 300,
        "MAX_CONNECTIONS": 1000,
        "PERMISSION": "django_xsm.stream.staff_may_view",
    },
}

#: Settings that no longer exist, with what to do instead: setting one is a
#: settings error (``xsm.E001``) saying so, never silently ignored.
REMOVED: dict[str, str] = {
    "SPECULATIVE": "the speculative one-round-trip block was removed and every block "
    "now opens with a read; delete this setting",
}

#: What a ``SENTINEL`` dict is merged with; HOSTS and SERVICE are required
#: (``SENTINEL`` itself defaults to None: no Sentinel).
SENTINEL_DEFAULTS: dict[str, Any] = {
    "HOSTS": None,
    "SERVICE": None,
    "DB": 0,
    "OPTIONS": {},
    "SENTINEL_OPTIONS": {},
}

_NESTED = ("IDEMPOTENCY", "AUDIT", "TIMERS", "OUTBOX", "DURABILITY", "DIAGRAM", "ADMIN", "STREAM")
#: Settings whose change invalidates what was built from XSM.
WATCHED = frozenset({"XSM", "DEBUG", "CACHES", "BASE_DIR"})
_HTTP_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE", "TRACE"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


@dataclass(frozen=True, slots=True)
class Idempotency:
    """``XSM['IDEMPOTENCY']``."""

    header: str
    required: frozenset[str]
    ttl_s: float
    lease_s: float | None
    max_response_bytes: int
    principal: str | None

    @property
    def meta_key(self) -> str:
        """The ``request.META`` name of :attr:`header`."""
        return "HTTP_" + self.header.upper().replace("-", "_")


@dataclass(frozen=True, slots=True)
class Audit:
    """``XSM['AUDIT']``."""

    enabled: bool
    maxlen: int | None
    redact: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Timers:
    """``XSM['TIMERS']``: retry policy of the due-timer scanner."""

    max_attempts: int
    backoff_s: float
    max_backoff_s: float


@dataclass(frozen=True, slots=True)
class Outbox:
    """``XSM['OUTBOX']``: where emitted events go and how their delivery is
    retried (docs/outbox.md).

    ``handlers`` maps an event-type pattern (``"order.paid"``, ``"order.*"``,
    ``"*"``) to the dotted path of its handler; the patterns are checked
    here, the paths are imported by :mod:`django_xsm.outbox.handlers`.
    """

    handlers: Mapping[str, str]
    max_attempts: int
    backoff_s: float
    max_backoff_s: float
    visibility_timeout_s: float

    @property
    def visibility_timeout_ms(self) -> int:
        """What ``RedisOutbox.take()`` wants: whole milliseconds, at least 1."""
        return max(1, round(self.visibility_timeout_s * 1000))


@dataclass(frozen=True, slots=True)
class Sentinel:
    """``XSM['SENTINEL']``: the sentinels, the service they monitor and how
    to connect to the primary they name.

    ``options`` go to ``Sentinel.master_for()`` (the primary's connection:
    password, username, ssl...), ``sentinel_options`` to the connections to
    the sentinels themselves (``sentinel_kwargs``). Both are left out of
    ``repr()``: they hold passwords.
    """

    hosts: tuple[tuple[str, int], ...]
    service: str
    db: int
    options: Mapping[str, Any] = field(repr=False)
    sentinel_options: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Durability:
    """``XSM['DURABILITY']``: a commit counts as done once ``min_replicas``
    replicas acknowledged it (Redis ``WAIT``), waiting at most
    ``timeout_ms``; 0 replicas (the default) does not wait."""

    min_replicas: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Diagram:
    """``XSM['DIAGRAM']``: who draws the state diagrams: ``"auto"``,
    ``"graphviz"`` or ``"builtin"`` (docs/settings.md, ``DIAGRAM``)."""

    renderer: str


@dataclass(frozen=True, slots=True)
class Admin:
    """``XSM['ADMIN']``: ``bulk_max`` is the most instances or rows one
    bulk send of the admin acts on (docs/admin.md#bulk-sends)."""

    bulk_max: int


@dataclass(frozen=True, slots=True)
class Stream:
    """``XSM['STREAM']``: the live transition stream (docs/settings.md,
    ``STREAM``; docs/live.md)."""

    heartbeat_s: float
    max_seconds: float | None
    max_connections: int
    permission: str


@dataclass(frozen=True, slots=True)
class XsmSettings:
    """``settings.XSM`` validated and merged with :data:`DEFAULTS`.

    ``raw`` is the merged dict (for display); the typed attributes are what
    code should read.
    """

    redis_url: str | None
    redis_options: Mapping[str, Any]
    redis_cluster: bool
    cache_alias: str | None
    sentinel: Sentinel | None
    embedded: bool | None
    prefix: str | None
    machines: Mapping[str, Any]
    lock: str
    lock_ttl_ms: int
    lock_timeout_s: float
    conflict_retries: int
    socket_timeout_s: float
    max_snapshot_bytes: int
    max_payload_bytes: int
    instance_ttl_s: float | None
    buckets: int | None
    codec: str | None
    codec_keys: tuple[str, ...] | None
    actor: str | None
    request_id_header: str | None
    request_timeout_s: float | None
    idempotency: Idempotency
    audit: Audit
    timers: Timers
    outbox: Outbox
    durability: Durability
    diagram: Diagram
    admin: Admin
    stream: Stream
    debug: bool
    raw: Mapping[str, Any]

    @property
    def uses_embedded(self) -> bool:
        """True when the store is the in-process fakeredis: nothing else is
        configured and either ``EMBEDDED`` is True or it is unset and
        ``DEBUG`` is on."""
        if self.has_server:
            return False
        return self.embedded if self.embedded is not None else self.debug

    @property
    def has_server(self) -> bool:
        """True when a Redis server is configured (``REDIS_URL``,
        ``CACHE_ALIAS`` or ``SENTINEL``)."""
        return bool(self.redis_url or self.cache_alias or self.sentinel)
