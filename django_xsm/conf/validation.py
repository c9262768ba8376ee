"""Validating ``settings.XSM``: every key, every type, every problem at once.

:func:`parse` goes on after the first problem and raises
:class:`InvalidSettings` listing all of them, so ``manage.py check`` shows
a user everything to fix in one round. Values in messages are bounded
(``reprlib``): a huge or deeply nested value cannot make a huge or a
crashing message.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm.exceptions import brief

from .values import (
    _HTTP_METHODS,
    _NESTED,
    DEFAULTS,
    SAFE_METHODS,
    Audit,
    Idempotency,
    Timers,
    XsmSettings,
)

__all__ = ["MAX_NUMBER", "InvalidSettings", "parse"]


class InvalidSettings(ImproperlyConfigured):
    """``settings.XSM`` has one or more problems; ``problems`` lists them
    all (``manage.py check`` reports each as ``xsm.E001``)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(problems))


class _Problems:
    """Collects every problem of one ``parse()``: validation goes on after
    the first, so a user fixes them all in one round."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def take(self, build: Callable[[], Any], default: Any = None) -> Any:
        try:
            return build()
        except ImproperlyConfigured as exc:
            self.found.append(str(exc))
            return default


def _name(*parts: str) -> str:
    return "XSM" + "".join(f"[{p!r}]" for p in parts)


def _fail(message: str, *parts: str, hint: str = "") -> ImproperlyConfigured:
    text = f"{_name(*parts)}: {message}"
    return ImproperlyConfigured(f"{text} ({hint})" if hint else text)


def _check_keys(
    given: Mapping[str, Any], allowed: Mapping[str, Any], *parts: str, into: _Problems
) -> None:
    for key in given:
        if key in allowed:
            continue
        where = _name(*parts, str(key)[:60])
        close = difflib.get_close_matches(str(key).upper(), list(allowed), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(allowed)}"
        into.found.append(f"Unknown setting {where} ({hint})")


def _opt_str(value: Any, *parts: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _fail(f"expected a non-empty string or None, got {brief(value)}", *parts)
    return value


#: The largest number any XSM setting takes (seconds, milliseconds, bytes,
#: counts): beyond it a value is a typo, and would overflow float() or a
#: Redis integer.
MAX_NUMBER = 10**12


def _number(
    value: Any, *parts: str, optional: bool = False, integer: bool = False, minimum: float = 0
) -> Any:
    if value is None and optional:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if (
        isinstance(value, bool)
        or not ok
        or (isinstance(value, float) and not math.isfinite(value))  # NaN passed "< minimum"
        or not minimum <= value <= MAX_NUMBER
    ):
        what = "an int" if integer else "a number"
        raise _fail(
            f"expected {what} from {minimum:g} to {MAX_NUMBER:.0e}"
            f"{' or None' if optional else ''}, got {brief(value)}",
            *parts,
        )
    return value


def _methods(value: Any) -> frozenset[str]:
    parts = ("IDEMPOTENCY", "REQUIRED")
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise _fail(
            f"expected a list of HTTP methods, got {brief(value)}", *parts, hint='e.g. ["POST"]'
        )
    methods = set()
    for item in value:
        if not isinstance(item, str) or item.upper() not in _HTTP_METHODS:
            raise _fail(f"{brief(item)} is not an HTTP method", *parts, hint='e.g. ["POST"]')
        method = item.upper()
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
            f"expected an HTTP header name such as 'Idempotency-Key', got {brief(value)}", *parts
        )
    return value


def _merged(user: Mapping[str, Any], into: _Problems) -> dict[str, Any]:
    merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULTS.items()}
    for key, value in user.items():
        if key not in DEFAULTS:
            continue  # reported by _check_keys
        if key in _NESTED:
            if not isinstance(value, Mapping):
                into.found.append(str(_fail(f"expected a dict, got {type(value).__name__}", key)))
                continue
            _check_keys(value, DEFAULTS[key], key, into=into)
            merged[key].update({k: v for k, v in value.items() if k in DEFAULTS[key]})
        else:
            merged[key] = value
    return merged


def _choice(value: Any, allowed: tuple[Any, ...], *parts: str) -> Any:
    if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
        wanted = ", ".join(repr(a) for a in allowed)
        raise _fail(f"expected one of {wanted}, got {brief(value)}", *parts)
    return value


def _mapping(value: Any, what: str, *parts: str, hint: str = "") -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(f"expected {what}", *parts, hint=hint)
    return dict(value)


def _redact(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _fail("expected a list of field-name fragments", "AUDIT", "REDACT")
    if not all(isinstance(f, str) and f for f in value):
        raise _fail("every entry must be a non-empty string", "AUDIT", "REDACT")
    return tuple(value)


def parse(user: Any, *, debug: bool) -> XsmSettings:
    """Validate a raw ``XSM`` value; raises :class:`InvalidSettings` (an
    ``ImproperlyConfigured``) listing every problem found."""
    if user is None:
        user = {}
    if not isinstance(user, Mapping):
        raise ImproperlyConfigured(
            f"settings.XSM must be a dict, got {type(user).__name__}",
        )
    p = _Problems()
    _check_keys(user, DEFAULTS, into=p)
    m = _merged(user, p)
    idem, audit, timers = m["IDEMPOTENCY"], m["AUDIT"], m["TIMERS"]
    request_id = m["REQUEST_ID_HEADER"]
    found = XsmSettings(
        redis_url=p.take(lambda: _opt_str(m["REDIS_URL"], "REDIS_URL")),
        redis_options=p.take(
            lambda: _mapping(
                m["REDIS_OPTIONS"], "a dict of redis-py client options", "REDIS_OPTIONS"
            ),
            {},
        ),
        cache_alias=p.take(lambda: _opt_str(m["CACHE_ALIAS"], "CACHE_ALIAS")),
        embedded=p.take(lambda: _choice(m["EMBEDDED"], (None, True, False), "EMBEDDED")),
        # The prefix's alphabet is checked with the connection
        # (django_xsm.backend.readiness, xsm.E002).
        prefix=p.take(lambda: _opt_str(m["PREFIX"], "PREFIX")),
        machines=p.take(
            lambda: _mapping(
                m["MACHINES"],
                "a dict of name -> dotted path",
                "MACHINES",
                hint="e.g. {'order': 'orders.machines.order'}",
            ),
            {},
        ),
        lock=p.take(
            lambda: _choice(m["LOCK"], ("optimistic", "pessimistic"), "LOCK"), "optimistic"
        ),
        lock_ttl_ms=p.take(
            lambda: _number(m["LOCK_TTL_MS"], "LOCK_TTL_MS", integer=True, minimum=1), 1
        ),
        lock_timeout_s=float(p.take(lambda: _number(m["LOCK_TIMEOUT_S"], "LOCK_TIMEOUT_S"), 0)),
        conflict_retries=p.take(
            lambda: _number(m["CONFLICT_RETRIES"], "CONFLICT_RETRIES", integer=True), 0
        ),
        socket_timeout_s=float(
            p.take(lambda: _number(m["SOCKET_TIMEOUT_S"], "SOCKET_TIMEOUT_S", minimum=0.001), 1)
        ),
        max_snapshot_bytes=p.take(
            lambda: _number(m["MAX_SNAPSHOT_BYTES"], "MAX_SNAPSHOT_BYTES", integer=True, minimum=1),
            1,
        ),
        instance_ttl_s=p.take(
            lambda: _number(m["INSTANCE_TTL_S"], "INSTANCE_TTL_S", optional=True, minimum=1)
        ),
        buckets=p.take(
            lambda: _number(m["BUCKETS"], "BUCKETS", optional=True, integer=True, minimum=1)
        ),
        codec=p.take(lambda: _opt_str(m["CODEC"], "CODEC")),
        actor=p.take(lambda: _opt_str(m["ACTOR"], "ACTOR")),
        request_id_header=None
        if request_id is None
        else p.take(lambda: _header(request_id, "REQUEST_ID_HEADER")),
        request_timeout_s=p.take(
            lambda: _number(
                m["REQUEST_TIMEOUT_S"], "REQUEST_TIMEOUT_S", optional=True, minimum=0.001
            )
        ),
        idempotency=Idempotency(
            header=p.take(lambda: _header(idem["HEADER"], "IDEMPOTENCY", "HEADER"), "X"),
            required=p.take(lambda: _methods(idem["REQUIRED"]), frozenset()),
            ttl_s=p.take(lambda: _number(idem["TTL_S"], "IDEMPOTENCY", "TTL_S", minimum=1), 1),
            lease_s=p.take(
                lambda: _number(idem["LEASE_S"], "IDEMPOTENCY", "LEASE_S", optional=True, minimum=1)
            ),
            max_response_bytes=p.take(
                lambda: _number(
                    idem["MAX_RESPONSE_BYTES"], "IDEMPOTENCY", "MAX_RESPONSE_BYTES", integer=True
                ),
                0,
            ),
            principal=p.take(lambda: _opt_str(idem["PRINCIPAL"], "IDEMPOTENCY", "PRINCIPAL")),
        ),
        audit=Audit(
            enabled=p.take(lambda: _choice(audit["ENABLED"], (True, False), "AUDIT", "ENABLED")),
            maxlen=p.take(
                lambda: _number(
                    audit["MAXLEN"], "AUDIT", "MAXLEN", optional=True, integer=True, minimum=1
                )
            ),
            redact=p.take(lambda: _redact(audit["REDACT"]), ()),
        ),
        timers=Timers(
            max_attempts=p.take(
                lambda: _number(
                    timers["MAX_ATTEMPTS"], "TIMERS", "MAX_ATTEMPTS", integer=True, minimum=1
                ),
                1,
            ),
            backoff_s=float(p.take(lambda: _number(timers["BACKOFF_S"], "TIMERS", "BACKOFF_S"), 0)),
            max_backoff_s=float(
                p.take(lambda: _number(timers["MAX_BACKOFF_S"], "TIMERS", "MAX_BACKOFF_S"), 0)
            ),
        ),
        debug=debug,
        raw=m,
    )
    if p.found:
        raise InvalidSettings(p.found)
    return found
