"""The ``XSM`` setting: defaults, validation and one cached accessor.

::

    from django_xsm.conf import get_settings
    get_settings().prefix          # "shop"
    get_settings().idempotency.header

Every key of ``settings.XSM`` and of its nested ``IDEMPOTENCY`` / ``AUDIT`` /
``TIMERS`` dicts is checked: an unknown key or a value of the wrong type
raises ``ImproperlyConfigured`` naming the key (``XSM['AUDIT']['MAXLEN']``)
and, when it looks like a typo, the key meant. The parsed settings are
cached until Django sends ``setting_changed`` for ``XSM``, ``DEBUG``,
``CACHES`` or ``BASE_DIR`` (``override_settings`` in tests); modules that
cache things built from settings (the backend, the machine registry) register a
callback with :func:`on_reset` so they are rebuilt too.

This module imports nothing from the rest of django_xsm.
"""

from __future__ import annotations

import difflib
import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

__all__ = [
    "DEFAULTS",
    "Audit",
    "Idempotency",
    "Timers",
    "XsmSettings",
    "get_settings",
    "on_reset",
    "reset",
]

#: The documented defaults (docs/settings.md). Nested dicts are merged key by
#: key with what the project sets, so ``"AUDIT": {"MAXLEN": 1000}`` keeps
#: ``ENABLED`` and ``REDACT``.
DEFAULTS: dict[str, Any] = {
    "REDIS_URL": None,
    "REDIS_OPTIONS": {},
    "CACHE_ALIAS": None,
    "EMBEDDED": None,
    "PREFIX": None,
    "MACHINES": {},
    "LOCK": "optimistic",
    "LOCK_TTL_MS": 30_000,
    "LOCK_TIMEOUT_S": 1.0,
    "CONFLICT_RETRIES": 3,
    "SOCKET_TIMEOUT_S": 5.0,
    "MAX_SNAPSHOT_BYTES": 1024 * 1024,
    "INSTANCE_TTL_S": None,
    "BUCKETS": None,
    "CODEC": None,
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
        "MAX_ATTEMPTS": 5,
        "BACKOFF_S": 1.0,
        "MAX_BACKOFF_S": 300.0,
    },
}

_NESTED = ("IDEMPOTENCY", "AUDIT", "TIMERS")
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
class XsmSettings:
    """``settings.XSM`` validated and merged with :data:`DEFAULTS`.

    ``raw`` is the merged dict (for display); the typed attributes are what
    code should read.
    """

    redis_url: str | None
    redis_options: Mapping[str, Any]
    cache_alias: str | None
    embedded: bool | None
    prefix: str | None
    machines: Mapping[str, Any]
    lock: str
    lock_ttl_ms: int
    lock_timeout_s: float
    conflict_retries: int
    socket_timeout_s: float
    max_snapshot_bytes: int
    instance_ttl_s: float | None
    buckets: int | None
    codec: str | None
    actor: str | None
    request_id_header: str | None
    request_timeout_s: float | None
    idempotency: Idempotency
    audit: Audit
    timers: Timers
    debug: bool
    raw: Mapping[str, Any]

    @property
    def uses_embedded(self) -> bool:
        """True when the store is the in-process fakeredis: nothing else is
        configured and either ``EMBEDDED`` is True or it is unset and
        ``DEBUG`` is on."""
        if self.redis_url or self.cache_alias:
            return False
        return self.embedded if self.embedded is not None else self.debug


# --- validation ------------------------------------------------------------------


def _name(*parts: str) -> str:
    return "XSM" + "".join(f"[{p!r}]" for p in parts)


def _fail(message: str, *parts: str, hint: str = "") -> ImproperlyConfigured:
    text = f"{_name(*parts)}: {message}"
    return ImproperlyConfigured(f"{text} ({hint})" if hint else text)


def _check_keys(given: Mapping[str, Any], allowed: Mapping[str, Any], *parts: str) -> None:
    for key in given:
        if key in allowed:
            continue
        where = _name(*parts, str(key))
        close = difflib.get_close_matches(str(key).upper(), list(allowed), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(allowed)}"
        raise ImproperlyConfigured(f"Unknown setting {where} ({hint})")


def _opt_str(value: Any, *parts: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _fail(f"expected a non-empty string or None, got {value!r}", *parts)
    return value


def _number(
    value: Any, *parts: str, optional: bool = False, integer: bool = False, minimum: float = 0
) -> Any:
    if value is None and optional:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or value < minimum:
        what = "an int" if integer else "a number"
        raise _fail(
            f"expected {what} >= {minimum:g}{' or None' if optional else ''}, got {value!r}",
            *parts,
        )
    return value


def _methods(value: Any) -> frozenset[str]:
    parts = ("IDEMPOTENCY", "REQUIRED")
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise _fail(f"expected a list of HTTP methods, got {value!r}", *parts, hint='e.g. ["POST"]')
    methods = set()
    for item in value:
        method = item.upper() if isinstance(item, str) else item
        if method not in _HTTP_METHODS:
            raise _fail(f"{item!r} is not an HTTP method", *parts)
        if method in SAFE_METHODS:
            raise _fail(
                f"{method} is a safe method; idempotency keys apply to POST, PUT, PATCH, DELETE",
                *parts,
            )
        methods.add(method)
    return frozenset(methods)


def _header(value: Any, *parts: str) -> str:
    if not isinstance(value, str) or not value or not all(c.isalnum() or c == "-" for c in value):
        raise _fail(
            f"expected an HTTP header name such as 'Idempotency-Key', got {value!r}", *parts
        )
    return value


def _merged(user: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULTS.items()}
    for key, value in user.items():
        if key in _NESTED:
            if not isinstance(value, Mapping):
                raise _fail(f"expected a dict, got {type(value).__name__}", key)
            _check_keys(value, DEFAULTS[key], key)
            merged[key].update(value)
        else:
            merged[key] = value
    return merged


def parse(user: Any, *, debug: bool) -> XsmSettings:
    """Validate a raw ``XSM`` value; raises ImproperlyConfigured."""
    if user is None:
        user = {}
    if not isinstance(user, Mapping):
        raise ImproperlyConfigured(
            f"settings.XSM must be a dict, got {type(user).__name__}",
        )
    _check_keys(user, DEFAULTS)
    m = _merged(user)
    if m["LOCK"] not in ("optimistic", "pessimistic"):
        raise _fail(f"expected 'optimistic' or 'pessimistic', got {m['LOCK']!r}", "LOCK")
    if not isinstance(m["REDIS_OPTIONS"], Mapping):
        raise _fail("expected a dict of redis-py client options", "REDIS_OPTIONS")
    if not isinstance(m["MACHINES"], Mapping):
        raise _fail(
            "expected a dict of name -> dotted path",
            "MACHINES",
            hint="e.g. {'order': 'orders.machines.order'}",
        )
    if m["EMBEDDED"] not in (None, True, False):
        raise _fail(f"expected True, False or None, got {m['EMBEDDED']!r}", "EMBEDDED")
    idem, audit, timers = m["IDEMPOTENCY"], m["AUDIT"], m["TIMERS"]
    if not isinstance(audit["ENABLED"], bool):
        raise _fail(f"expected True or False, got {audit['ENABLED']!r}", "AUDIT", "ENABLED")
    redact = audit["REDACT"]
    if isinstance(redact, str) or not isinstance(redact, list | tuple):
        raise _fail("expected a list of field-name fragments", "AUDIT", "REDACT")
    if not all(isinstance(f, str) and f for f in redact):
        raise _fail("every entry must be a non-empty string", "AUDIT", "REDACT")
    request_id = m["REQUEST_ID_HEADER"]
    return XsmSettings(
        redis_url=_opt_str(m["REDIS_URL"], "REDIS_URL"),
        redis_options=dict(m["REDIS_OPTIONS"]),
        cache_alias=_opt_str(m["CACHE_ALIAS"], "CACHE_ALIAS"),
        embedded=m["EMBEDDED"],
        # The prefix's alphabet is checked with the connection
        # (django_xsm.backend.readiness, xsm.E002).
        prefix=_opt_str(m["PREFIX"], "PREFIX"),
        machines=dict(m["MACHINES"]),
        lock=m["LOCK"],
        lock_ttl_ms=_number(m["LOCK_TTL_MS"], "LOCK_TTL_MS", integer=True, minimum=1),
        lock_timeout_s=float(_number(m["LOCK_TIMEOUT_S"], "LOCK_TIMEOUT_S")),
        conflict_retries=_number(m["CONFLICT_RETRIES"], "CONFLICT_RETRIES", integer=True),
        socket_timeout_s=float(_number(m["SOCKET_TIMEOUT_S"], "SOCKET_TIMEOUT_S", minimum=0.001)),
        max_snapshot_bytes=_number(
            m["MAX_SNAPSHOT_BYTES"], "MAX_SNAPSHOT_BYTES", integer=True, minimum=1
        ),
        instance_ttl_s=_number(m["INSTANCE_TTL_S"], "INSTANCE_TTL_S", optional=True, minimum=1),
        buckets=_number(m["BUCKETS"], "BUCKETS", optional=True, integer=True, minimum=1),
        codec=_opt_str(m["CODEC"], "CODEC"),
        actor=_opt_str(m["ACTOR"], "ACTOR"),
        request_id_header=None if request_id is None else _header(request_id, "REQUEST_ID_HEADER"),
        request_timeout_s=_number(
            m["REQUEST_TIMEOUT_S"], "REQUEST_TIMEOUT_S", optional=True, minimum=0.001
        ),
        idempotency=Idempotency(
            header=_header(idem["HEADER"], "IDEMPOTENCY", "HEADER"),
            required=_methods(idem["REQUIRED"]),
            ttl_s=_number(idem["TTL_S"], "IDEMPOTENCY", "TTL_S", minimum=1),
            lease_s=_number(idem["LEASE_S"], "IDEMPOTENCY", "LEASE_S", optional=True, minimum=1),
            max_response_bytes=_number(
                idem["MAX_RESPONSE_BYTES"], "IDEMPOTENCY", "MAX_RESPONSE_BYTES", integer=True
            ),
            principal=_opt_str(idem["PRINCIPAL"], "IDEMPOTENCY", "PRINCIPAL"),
        ),
        audit=Audit(
            enabled=audit["ENABLED"],
            maxlen=_number(
                audit["MAXLEN"], "AUDIT", "MAXLEN", optional=True, integer=True, minimum=1
            ),
            redact=tuple(redact),
        ),
        timers=Timers(
            max_attempts=_number(
                timers["MAX_ATTEMPTS"], "TIMERS", "MAX_ATTEMPTS", integer=True, minimum=1
            ),
            backoff_s=float(_number(timers["BACKOFF_S"], "TIMERS", "BACKOFF_S")),
            max_backoff_s=float(_number(timers["MAX_BACKOFF_S"], "TIMERS", "MAX_BACKOFF_S")),
        ),
        debug=debug,
        raw=m,
    )


@functools.lru_cache(maxsize=1)
def get_settings() -> XsmSettings:
    """The validated ``XSM`` settings (cached; see the module docstring).

    Raises ``ImproperlyConfigured`` naming the offending key.
    """
    return parse(getattr(django_settings, "XSM", None), debug=bool(django_settings.DEBUG))


# --- reset ---------------------------------------------------------------------

_reset_callbacks: list[Callable[[], None]] = []
_reset_lock = threading.Lock()


def on_reset(callback: Callable[[], None]) -> Callable[[], None]:
    """Register ``callback`` to run whenever the settings are reloaded."""
    with _reset_lock:
        if callback not in _reset_callbacks:
            _reset_callbacks.append(callback)
    return callback


def reset() -> None:
    """Forget the cached settings and everything built from them."""
    get_settings.cache_clear()
    with _reset_lock:
        callbacks = list(_reset_callbacks)
    for callback in callbacks:
        callback()


@receiver(setting_changed)
def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in WATCHED:
        reset()
