"""Validating ``settings.XSM``: every key, every type, every problem at once.

:func:`parse` goes on after the first problem and raises
:class:`InvalidSettings` listing all of them, so ``manage.py check`` shows
a user everything to fix in one round. Single values are checked in
:mod:`.parsing`, ``REDIS_CLUSTER``, ``SENTINEL`` and ``DURABILITY`` in
:mod:`.topology`, ``OUTBOX`` in :mod:`.outbox`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm.brief import brief
from django_xsm.persistence.arguments import MAX_LOG_MAXLEN

from . import topology
from .outbox import backoff_fits, outbox
from .parsing import (
    MAX_NUMBER,
    Problems,
    a_type,
    check_keys,
    choice,
    fail,
    mapping,
    number,
    opt_str,
)
from .values import (
    _HTTP_METHODS,
    _NESTED,
    DEFAULTS,
    REMOVED,
    SAFE_METHODS,
    Admin,
    Audit,
    Diagram,
    Idempotency,
    Stream,
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


def _methods(value: Any) -> frozenset[str]:
    parts = ("IDEMPOTENCY", "REQUIRED")
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise fail(
            f"expected a list of HTTP methods, got {brief(value)}", *parts, hint='e.g. ["POST"]'
        )
    methods = set()
    for item in value:
        if not isinstance(item, str) or item.upper() not in _HTTP_METHODS:
            raise fail(f"{brief(item)} is not an HTTP method", *parts, hint='e.g. ["POST"]')
        method = item.upper()
        if method in SAFE_METHODS:
            raise fail(
                f"{method} is a safe method; idempotency keys apply to POST, PUT, PATCH, DELETE",
                *parts,
            )
        methods.add(method)
    return frozenset(methods)


def _header(value: Any, *parts: str) -> str:
    if not isinstance(value, str) or not value or not all(c.isalnum() or c == "-" for c in value):
        raise fail(
            f"expected an HTTP header name such as 'Idempotency-Key', got {brief(value)}", *parts
        )
    return value


#: The numeric settings: path -> (:func:`.parsing.number`'s limits, the value
#: taken in its place while the problem is reported).
_NUMBERS: dict[tuple[str, ...], tuple[dict[str, Any], Any]] = {
    ("LOCK_TTL_MS",): ({"integer": True, "minimum": 1}, 1),
    ("LOCK_TIMEOUT_S",): ({}, 0),
    ("CONFLICT_RETRIES",): ({"integer": True}, 0),
    ("SOCKET_TIMEOUT_S",): ({"minimum": 0.001}, 1),
    ("MAX_SNAPSHOT_BYTES",): ({"integer": True, "minimum": 1}, 1),
    ("MAX_PAYLOAD_BYTES",): ({"integer": True, "minimum": 1}, 1),
    ("INSTANCE_TTL_S",): ({"optional": True, "minimum": 1}, None),
    ("BUCKETS",): ({"optional": True, "integer": True, "minimum": 1}, None),
    ("REQUEST_TIMEOUT_S",): ({"optional": True, "minimum": 0.001}, None),
    ("IDEMPOTENCY", "TTL_S"): ({"minimum": 1}, 1),
    ("IDEMPOTENCY", "LEASE_S"): ({"optional": True, "minimum": 1}, None),
    ("IDEMPOTENCY", "MAX_RESPONSE_BYTES"): ({"integer": True}, 0),
    ("AUDIT", "MAXLEN"): (
        {"optional": True, "integer": True, "minimum": 1, "maximum": MAX_LOG_MAXLEN},
        None,
    ),
    ("TIMERS", "MAX_ATTEMPTS"): ({"integer": True, "minimum": 1}, 1),
    ("TIMERS", "BACKOFF_S"): ({}, 0),
    # an unreadable cap takes no part in the check against BACKOFF_S
    ("TIMERS", "MAX_BACKOFF_S"): ({}, math.inf),
    ("ADMIN", "BULK_MAX"): (
        {
            "integer": True,
            "minimum": 1,
            "maximum": 10_000,
            "hint": "each selected instance is read and sent one by one in the request",
        },
        1,
    ),
    ("STREAM", "HEARTBEAT_S"): (
        {
            "minimum": 0.1,
            "maximum": 3600,
            "hint": "proxies close a silent connection, often after 30 to 60 s",
        },
        15,
    ),
    ("STREAM", "MAX_SECONDS"): (
        {
            "optional": True,
            "minimum": 1,
            "maximum": 86_400,
            "hint": "a stream ends after this long and the client resumes where it left off",
        },
        300,
    ),
    ("STREAM", "MAX_CONNECTIONS"): ({"integer": True, "minimum": 1}, 1),
}


def _number(m: Mapping[str, Any], p: Problems, *path: str) -> Any:
    """The numeric setting at ``path``, within its :data:`_NUMBERS` limits."""
    limits, stand_in = _NUMBERS[path]
    value = m[path[0]] if len(path) == 1 else m[path[0]][path[1]]
    return p.take(number, value, *path, default=stand_in, **limits)


def _stream(m: Mapping[str, Any], p: Problems) -> Stream:
    """``XSM['STREAM']``; the permission's path is imported by the stream
    (a path that does not import is ``xsm.E010``, not a settings error)."""
    permission = m["STREAM"]["PERMISSION"]
    if not isinstance(permission, str) or not permission.strip():
        p.report(
            f"expected the dotted path of fn(request, key) -> bool, got {brief(permission)}",
            "STREAM",
            "PERMISSION",
            hint="the default is 'django_xsm.stream.staff_may_view'",
        )
        permission = ""
    return Stream(
        heartbeat_s=float(_number(m, p, "STREAM", "HEARTBEAT_S")),
        max_seconds=_number(m, p, "STREAM", "MAX_SECONDS"),
        max_connections=_number(m, p, "STREAM", "MAX_CONNECTIONS"),
        permission=permission,
    )


_LOCKS = ("adaptive", "optimistic", "pessimistic")
_RENDERERS = ("auto", "graphviz", "builtin")


def _merged(user: Mapping[str, Any], into: Problems) -> dict[str, Any]:
    merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEFAULTS.items()}
    for key, value in user.items():
        if key not in DEFAULTS:
            continue  # reported by _check_keys
        if key in _NESTED:
            if not isinstance(value, Mapping):
                into.report(f"expected a dict, got {type(value).__name__}", key)
                continue
            check_keys(value, DEFAULTS[key], key, into=into)
            merged[key].update({k: v for k, v in value.items() if k in DEFAULTS[key]})
        else:
            merged[key] = value
    return merged


def _redact(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise fail("expected a list of field-name fragments", "AUDIT", "REDACT")
    if not all(isinstance(f, str) and f for f in value):
        raise fail("every entry must be a non-empty string", "AUDIT", "REDACT")
    return tuple(value)


def _codec_keys(value: Any, codec: Any) -> tuple[str, ...] | None:
    """None, or the codec's keys, newest first: a non-empty list of
    non-empty strings (not one string: its characters are no keys). The
    keys are secrets: a message names their types, never their values.
    Keys of the default codec (``CODEC`` None or ``FernetCodec``) must be
    Fernet keys, checked here so that ``manage.py check`` reports a bad one
    (not the first request that builds the codec)."""
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not value:
        empty = value in ("", b"", [], ())
        got = f"an empty {type(value).__name__}" if empty else a_type(value)
        raise fail(
            f"expected a non-empty list of key strings, newest first, got {got}",
            "CODEC_KEYS",
            hint='e.g. [os.environ["XSM_KEY"]], not the key itself',
        )
    for i, key in enumerate(value):
        if not isinstance(key, str) or not key:
            got = "an empty str" if key == "" else a_type(key)
            raise fail(f"every key must be a non-empty string, got {got}", "CODEC_KEYS", i)
        if codec in _FERNET_CODECS and not _is_fernet_key(key):
            raise fail(
                "is not a Fernet key: a key is 32 url-safe base64-encoded bytes "
                f"(44 characters; this one has {len(key)})",
                "CODEC_KEYS",
                i,
                hint="generate one with cryptography.fernet.Fernet.generate_key().decode()",
            )
    return tuple(value)


#: The ``CODEC`` values that make ``CODEC_KEYS`` Fernet keys (None: the default).
_FERNET_CODECS = (
    None,
    "django_xsm.persistence.FernetCodec",
    "django_xsm.persistence.codecs.FernetCodec",
)


def _is_fernet_key(key: str) -> bool:
    """What ``cryptography.fernet.Fernet(key)`` accepts: 32 bytes in
    url-safe base64."""
    try:
        return len(base64.urlsafe_b64decode(key.encode())) == 32
    except (ValueError, UnicodeEncodeError):  # binascii.Error is a ValueError
        return False


def _connection(m: Mapping[str, Any], p: Problems) -> dict[str, Any]:
    """The connection settings: where Redis is and what shape it has."""
    url = p.take(opt_str, m["REDIS_URL"], "REDIS_URL", secret=True)
    alias = p.take(opt_str, m["CACHE_ALIAS"], "CACHE_ALIAS")
    what = "a dict of redis-py client options"
    options = p.take(mapping, m["REDIS_OPTIONS"], what, "REDIS_OPTIONS", default={})
    sentinel = topology.sentinel(m["SENTINEL"], p)
    if options and m["SENTINEL"] is not None:
        p.report(
            "is not used with SENTINEL",
            "REDIS_OPTIONS",
            hint="put the primary's connection options in XSM['SENTINEL']['OPTIONS'] "
            "and the sentinels' in XSM['SENTINEL']['SENTINEL_OPTIONS']",
        )
    cluster = p.take(
        topology.redis_cluster,
        m["REDIS_CLUSTER"],
        redis_url=url,
        cache_alias=alias,
        sentinel_set=m["SENTINEL"] is not None,
        default=False,
    )
    return {
        "redis_url": url,
        "redis_options": options,
        "redis_cluster": cluster,
        "cache_alias": alias,
        "sentinel": sentinel,
    }


def parse(user: Any, *, debug: bool, caches: Mapping[str, Any] | None = None) -> XsmSettings:
    """Validate a raw ``XSM`` value; raises :class:`InvalidSettings` (an
    ``ImproperlyConfigured``) listing every problem found.

    ``caches`` is Django's ``CACHES``: with ``CACHE_ALIAS`` the alias's
    socket timeout is read from it (:func:`.topology.wait_fits`); without
    it that one check is skipped."""
    if user is None:
        user = {}
    if not isinstance(user, Mapping):
        raise InvalidSettings([f"settings.XSM must be a dict, got {type(user).__name__}"])
    p = Problems()
    check_keys(user, DEFAULTS, into=p, removed=REMOVED)
    m = _merged(user, p)
    idem, audit = m["IDEMPOTENCY"], m["AUDIT"]
    request_id = m["REQUEST_ID_HEADER"]
    found = XsmSettings(
        **_connection(m, p),
        embedded=p.take(choice, m["EMBEDDED"], (None, True, False), "EMBEDDED"),
        # The prefix's alphabet is checked with the connection
        # (django_xsm.backend.readiness, xsm.E002).
        prefix=p.take(opt_str, m["PREFIX"], "PREFIX"),
        machines=p.take(
            mapping,
            m["MACHINES"],
            "a dict of name -> dotted path",
            "MACHINES",
            hint="e.g. {'order': 'orders.machines.order'}",
            default={},
        ),
        lock=p.take(choice, m["LOCK"], _LOCKS, "LOCK", default="adaptive"),
        lock_ttl_ms=_number(m, p, "LOCK_TTL_MS"),
        lock_timeout_s=float(_number(m, p, "LOCK_TIMEOUT_S")),
        conflict_retries=_number(m, p, "CONFLICT_RETRIES"),
        socket_timeout_s=float(_number(m, p, "SOCKET_TIMEOUT_S")),
        max_snapshot_bytes=_number(m, p, "MAX_SNAPSHOT_BYTES"),
        max_payload_bytes=_number(m, p, "MAX_PAYLOAD_BYTES"),
        instance_ttl_s=_number(m, p, "INSTANCE_TTL_S"),
        buckets=_number(m, p, "BUCKETS"),
        codec=p.take(opt_str, m["CODEC"], "CODEC"),
        codec_keys=p.take(_codec_keys, m["CODEC_KEYS"], m["CODEC"]),
        actor=p.take(opt_str, m["ACTOR"], "ACTOR"),
        request_id_header=None
        if request_id is None
        else p.take(_header, request_id, "REQUEST_ID_HEADER"),
        request_timeout_s=_number(m, p, "REQUEST_TIMEOUT_S"),
        idempotency=Idempotency(
            header=p.take(_header, idem["HEADER"], "IDEMPOTENCY", "HEADER", default="X"),
            required=p.take(_methods, idem["REQUIRED"], default=frozenset()),
            ttl_s=_number(m, p, "IDEMPOTENCY", "TTL_S"),
            lease_s=_number(m, p, "IDEMPOTENCY", "LEASE_S"),
            max_response_bytes=_number(m, p, "IDEMPOTENCY", "MAX_RESPONSE_BYTES"),
            principal=p.take(opt_str, idem["PRINCIPAL"], "IDEMPOTENCY", "PRINCIPAL"),
        ),
        audit=Audit(
            enabled=p.take(choice, audit["ENABLED"], (True, False), "AUDIT", "ENABLED"),
            maxlen=_number(m, p, "AUDIT", "MAXLEN"),
            redact=p.take(_redact, audit["REDACT"], default=()),
        ),
        timers=Timers(
            max_attempts=_number(m, p, "TIMERS", "MAX_ATTEMPTS"),
            backoff_s=float(_number(m, p, "TIMERS", "BACKOFF_S")),
            max_backoff_s=float(_number(m, p, "TIMERS", "MAX_BACKOFF_S")),
        ),
        outbox=outbox(m["OUTBOX"], p),
        durability=topology.durability(m["DURABILITY"], p),
        diagram=Diagram(
            renderer=p.take(
                choice, m["DIAGRAM"]["RENDERER"], _RENDERERS, "DIAGRAM", "RENDERER", default="auto"
            )
        ),
        admin=Admin(bulk_max=_number(m, p, "ADMIN", "BULK_MAX")),
        stream=_stream(m, p),
        debug=debug,
        raw=m,
    )
    p.take(topology.durability_fits, found)
    p.take(topology.wait_fits, found, caches)
    p.take(backoff_fits, "TIMERS", found.timers.backoff_s, found.timers.max_backoff_s)
    if p.found:
        raise InvalidSettings(p.found)
    return found
