"""``XsmMiddleware`` and ``request.xsm``: what django-xsm reads from a request.

``request.xsm`` (a :class:`RequestInfo`) holds the parsed
``idempotency_key`` (or ``idempotency_error``, answered with 400 by any
view that would use it), the ``correlation_id`` and, resolved lazily, the
``actor`` and ``principal``; what each accepts and where it comes from:
docs/django.md (``XsmMiddleware`` and ``request.xsm``) and docs/http.md
(Request and correlation ids). Hostile header values are replaced, never
used, so nothing a client sends reaches logs or headers unchecked.

The middleware is sync and async capable, and turns any ``XsmError`` a
view raises into its HTTP response (``django_xsm.http``). ``@stateful_view``
works without it (it builds ``request.xsm`` itself).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase
from django.utils.module_loading import import_string

from django_xsm import conf, http
from django_xsm.backend.context import request_scope
from django_xsm.exceptions import IdempotencyKeyError, XsmError
from django_xsm.persistence.idempotency import validate_idempotency_key

__all__ = [
    "RequestInfo",
    "XsmMiddleware",
    "get_request_info",
    "parse_correlation_id",
    "parse_idempotency_key",
]

# RFC 9110 tchar plus ":" "/" (RFC 8941 tokens) and "=" (base64 padding).
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~:/=]+")
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=@\-]{1,128}")
# The inside of an RFC 8941 sf-string: anything but '"' and '\', or \" and \\.
_SF_CHARS = re.compile(r'(?:[^"\\]|\\["\\])*')
_SF_ESCAPE = re.compile(r'\\(["\\])')
_MAX_RAW_HEADER = 1024
_MAX_ACTOR = 200


def _several_keys() -> IdempotencyKeyError:
    # The server joins repeated headers with ", ": two keys arrived.
    return IdempotencyKeyError(
        "several Idempotency-Key values were sent",
        hint="send exactly one Idempotency-Key header per request",
    )


def parse_idempotency_key(raw: str) -> str:
    """The key carried by an ``Idempotency-Key`` header value.

    Accepts a bare token or an RFC 8941 sf-string (``"..."`` with ``\\"``
    and ``\\\\`` escapes); raises ``IdempotencyKeyError`` otherwise.
    """
    value = raw.strip(" \t")
    if len(value) > _MAX_RAW_HEADER:
        raise IdempotencyKeyError(f"Idempotency-Key header is {len(value)} characters long")
    if value.startswith('"'):
        if len(value) < 2 or not value.endswith('"'):
            raise IdempotencyKeyError("Idempotency-Key quoted string is not terminated")
        inner = value[1:-1]
        found = _SF_CHARS.match(inner)
        end = found.end() if found else 0
        if end < len(inner):  # stopped at a bad escape or an unescaped quote
            if inner[end] == "\\":
                raise IdempotencyKeyError(
                    "Idempotency-Key quoted string has an invalid escape",
                    hint='only \\" and \\\\ may be escaped',
                )
            if inner[end + 1 :].lstrip(" \t").startswith(","):
                raise _several_keys()
            raise IdempotencyKeyError("Idempotency-Key quoted string has an unescaped quote")
        key = _SF_ESCAPE.sub(r"\1", inner)
    else:
        if "," in value:
            raise _several_keys()
        if value and not _TOKEN.fullmatch(value):
            raise IdempotencyKeyError(
                "Idempotency-Key is neither a token nor a quoted string",
                hint='send a UUID, or quote the value: Idempotency-Key: "my key"',
            )
        key = value
    return validate_idempotency_key(key)


def parse_correlation_id(request: HttpRequest) -> str:
    """The request's correlation id (see the module docstring)."""
    traceparent = request.META.get("HTTP_TRACEPARENT", "")
    if traceparent:
        found = _TRACEPARENT.fullmatch(traceparent.strip().lower())
        if found:
            version, trace_id, parent_id, _flags, rest = found.groups()
            valid = (
                version != "ff"
                and (version != "00" or rest is None)
                and trace_id != "0" * 32
                and parent_id != "0" * 16
            )
            if valid:
                return trace_id
    header = conf.get_settings().request_id_header
    if header:
        value = request.META.get("HTTP_" + header.upper().replace("-", "_"), "")
        if value and _REQUEST_ID.fullmatch(value):
            return str(value)
    return uuid.uuid4().hex


def _callable(path: str | None, setting: str) -> Callable[[HttpRequest], Any] | None:
    if path is None:
        return None
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting}: cannot import {path!r}: {exc}") from exc
    if not callable(found):
        raise ImproperlyConfigured(f"{setting}: {path!r} is not callable")
    return found  # type: ignore[no-any-return]


def _authenticated(user: Any) -> bool:
    return bool(user is not None and getattr(user, "is_authenticated", False))


def _actor_of(user: Any) -> str:
    if not _authenticated(user):
        return "anonymous"
    name = user.get_username() if hasattr(user, "get_username") else ""
    return str(name or f"user:{user.pk}")


def _principal_of(user: Any) -> str:
    return f"user:{user.pk}" if _authenticated(user) else "anonymous"


def _checked(value: Any, setting: str) -> str:
    if not isinstance(value, str):
        raise ImproperlyConfigured(f"{setting} must return a str, got {type(value).__name__}")
    cleaned = "".join(c for c in value if c.isprintable())[:_MAX_ACTOR]
    return cleaned or "anonymous"


class RequestInfo:
    """What django-xsm parsed from one request (``request.xsm``)."""

    def __init__(self, request: HttpRequest) -> None:
        s = conf.get_settings()
        self.idempotency_key: str | None = None
        self.idempotency_error: IdempotencyKeyError | None = None
        raw = request.META.get(s.idempotency.meta_key)
        if raw is not None:
            try:
                self.idempotency_key = parse_idempotency_key(raw)
            except IdempotencyKeyError as exc:
                self.idempotency_error = exc
        self.correlation_id = parse_correlation_id(request)
        self._request = request
        self._actor: str | None = None
        self._principal: str | None = None

    def _resolve(self, user: Any) -> None:
        s = conf.get_settings()
        actor_fn = _callable(s.actor, "XSM['ACTOR']")
        principal_fn = _callable(s.idempotency.principal, "XSM['IDEMPOTENCY']['PRINCIPAL']")
        if self._actor is None:
            self._actor = (
                _checked(actor_fn(self._request), "XSM['ACTOR']")
                if actor_fn is not None
                else _actor_of(user)
            )
        if self._principal is None:
            self._principal = (
                _checked(principal_fn(self._request), "XSM['IDEMPOTENCY']['PRINCIPAL']")
                if principal_fn is not None
                else _principal_of(user)
            )

    def _sync_resolve(self) -> None:
        self._resolve(getattr(self._request, "user", None))

    def _resolved(self) -> tuple[str, str]:
        if self._actor is None or self._principal is None:
            self._sync_resolve()
        assert self._actor is not None and self._principal is not None
        return self._actor, self._principal

    @property
    def actor(self) -> str:
        """Who acts, for the transition log (resolved on first access)."""
        return self._resolved()[0]

    @property
    def resolved_actor(self) -> str | None:
        """The actor if already resolved (no lookup), else None."""
        return self._actor

    @property
    def principal(self) -> str:
        """The idempotency scope of this request's key."""
        return self._resolved()[1]

    async def aresolve(self) -> None:
        """Resolve actor and principal from async code: ``request.user`` is
        a lazy database lookup, which Django forbids on the event loop."""
        if self._actor is not None and self._principal is not None:
            return
        s = conf.get_settings()
        if s.actor is None and s.idempotency.principal is None:
            auser = getattr(self._request, "auser", None)
            self._resolve(await auser() if auser is not None else None)
        else:
            await sync_to_async(self._sync_resolve)()

    def key_for(self, method: str, required: frozenset[str]) -> str | None:
        """The idempotency key this request must be claimed under, or None.

        Safe methods never claim. A required key that is missing, or any
        malformed key, raises ``IdempotencyKeyError`` (400).
        """
        if method in conf.SAFE_METHODS:
            return None
        if self.idempotency_error is not None:
            raise self.idempotency_error
        if self.idempotency_key is None and method in required:
            header = conf.get_settings().idempotency.header
            raise IdempotencyKeyError(
                f"{method} requests to this endpoint need an {header} header",
                hint=f"send {header}: <a fresh UUID>, and the same value when retrying",
            )
        return self.idempotency_key

    def __repr__(self) -> str:
        return f"<RequestInfo key={self.idempotency_key!r} correlation_id={self.correlation_id!r}>"


def get_request_info(request: HttpRequest) -> RequestInfo:
    """``request.xsm``, parsed on first use."""
    found = getattr(request, "xsm", None)
    if isinstance(found, RequestInfo):
        return found
    info = RequestInfo(request)
    request.xsm = info  # type: ignore[attr-defined]  # django-xsm's own request attribute
    return info


class XsmMiddleware:
    """Parses ``request.xsm``, maps ``XsmError`` to responses, echoes the
    correlation id. Place it after ``AuthenticationMiddleware`` when the
    actor comes from ``request.user``."""

    sync_capable = True
    async_capable = True

    def __init__(
        self,
        get_response: Callable[[HttpRequest], HttpResponseBase]
        | Callable[[HttpRequest], Awaitable[HttpResponseBase]],
    ) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.is_async:
            return self.__acall__(request)
        info = get_request_info(request)
        with request_scope(info.correlation_id, lambda: info.actor):
            response = self.get_response(request)
        assert isinstance(response, HttpResponseBase)  # a sync chain
        return self._finish(info, response)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        info = get_request_info(request)
        # On the event loop the actor is only known once resolved (request.user
        # is a database lookup): async views resolve it (@stateful_view does).
        with request_scope(info.correlation_id, lambda: info.resolved_actor or ""):
            pending = self.get_response(request)
            assert not isinstance(pending, HttpResponseBase)  # an async chain
            response = await pending
        return self._finish(info, response)

    @staticmethod
    def _finish(info: RequestInfo, response: HttpResponseBase) -> HttpResponseBase:
        header = conf.get_settings().request_id_header
        if header and header not in response:
            response[header] = info.correlation_id
        return response

    def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponseBase | None:
        """Any ``XsmError`` leaving a view becomes its HTTP response."""
        if isinstance(exception, XsmError):
            return http.error_response(exception, request)
        return None
