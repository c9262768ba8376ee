"""Every HTTP status django-xsm answers with, in one place; the table of
situations, statuses and problem types is docs/http.md.

Bodies are RFC 9457 ``application/problem+json`` (``type``, ``title``,
``status``, ``detail`` plus extension members such as ``retry_after``) for
API clients; a client that asks for HTML without JSON gets the same text
as ``text/plain``. Details are the errors' own messages, which never carry
a host, port or password (the Redis layer strips them).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.request import RawPostDataException
from django.urls import NoReverseMatch, reverse

from django_xsm.exceptions import (
    ConflictError,
    EventNotAcceptedError,
    EventPermissionError,
    IdempotencyInFlightError,
    IdempotencyKeyError,
    IdempotencyMismatchError,
    InstanceNotFoundError,
    InvalidEventError,
    LockTimeoutError,
    MigrationError,
    NotDurableError,
    PayloadTooLargeError,
    ReservedEventError,
    SnapshotTooLargeError,
    StoreAuthenticationError,
    StoreUnavailableError,
    UnknownEventError,
    UnstorableValueError,
    XsmError,
)

__all__ = [
    "PROBLEM_TYPES",
    "REPLAYED_HEADER",
    "body_too_large_response",
    "capture_response",
    "documented_problem",
    "error_response",
    "invalid_key_response",
    "problem_response",
    "problem_type_uri",
    "replay_response",
    "request_fingerprint",
    "wants_json",
]

logger = logging.getLogger("django_xsm.http")

#: What each problem ``type`` means and what to do (docs/http.md says the
#: same); ``/_xsm/problems/<slug>`` (django_xsm.urls) serves it as a page.
PROBLEM_TYPES: dict[str, tuple[int, str, str]] = {
    "idempotency-key": (400, "Invalid or missing idempotency key",
        "The request needs an Idempotency-Key header and has none, or the header is "
        "malformed. Send a fresh UUID, and the same value when retrying."),
    "invalid-key": (400, "Invalid instance key",
        "The instance key built from the URL is empty, too long or has control "
        "characters. Check the URL."),
    "invalid-event": (400, "Invalid event",
        "The request's event has no usable type: send an object whose 'type' is a "
        "non-empty string, such as {\"type\": \"PAY\"}. Nothing was written."),
    "payload-too-large": (413, "The request or its event payload is too large",
        "The request body is larger than the server reads, or the event's payload is "
        "larger than it accepts (max_bytes). Nothing was written; send less, for "
        "example an id of the data instead of the data."),
    "snapshot-too-large": (422, "The instance would grow too large",
        "The event would make the instance's stored state larger than the server "
        "accepts. Nothing was written; retrying the same event will not help."),
    "in-flight": (409, "A request with this idempotency key is in flight",
        "Another request with the same key is still running. Retry after Retry-After "
        "seconds: you then get its response replayed."),
    "idempotency-mismatch": (422, "Idempotency key reused for another request",
        "The key was already used for a different request. Use a new key for a new "
        "request; a retry must repeat the original request exactly."),
    "event-not-accepted": (409, "Event not accepted in the current state",
        "The current state has no enabled transition for the event (unknown there, or "
        "every guard said no). Nothing was written; retrying will not help until the "
        "state changes."),
    "unknown-event": (422, "Unknown event type",
        "No state of the machine's chart ever takes this event type: most likely a typo. "
        "The detail and the suggestions member name the closest types. Nothing was "
        "written."),
    "reserved-event": (403, "Reserved event type",
        "Event types in the xstate.* and xsm.* namespaces are sent only by django-xsm "
        "itself (timers, the outbox worker), never by a client. Nothing was written."),
    "conflict": (409, "The instance was changed by another request",
        "Another request committed the same instance first, again and again. Retry after "
        "Retry-After seconds."),
    "locked": (409, "The instance is locked by another request",
        "Another request holds the instance's lock. Retry after Retry-After seconds."),
    "not-found": (404, "No such instance", "No instance exists under this key."),
    "unavailable": (503, "The state store is unavailable",
        "The state store could not be reached or refused writes. Nothing was written. "
        "Retry after Retry-After seconds."),
    "internal": (500, "Internal error",
        "The server could not process the request; the error is in the server's log."),
    "unstorable-value": (422, "A value cannot be stored",
        "The request carries a value the state store cannot keep exactly (for example "
        "a string with a lone surrogate such as \\ud800). Nothing was written; fix the "
        "value named in the detail."),
    "store-misconfigured": (500, "The state store refused our credentials",
        "The server's Redis credentials or permissions are wrong. Nothing was written; "
        "retrying will not help until an operator fixes the configuration."),
    "machine-changed": (500, "The instance was stored by another version of its chart",
        "The instance was written by a chart that differs from the one the server runs "
        "now (a state renamed or removed without a new machine version, or a version "
        "with no migration from the stored one), so it cannot be loaded. Nothing was "
        "written; retrying will not help until an operator deploys a version bump with a "
        "migration (or the previous chart)."),
    "not-durable": (503, "The change is not yet safe on enough replicas",
        "The change reached the primary, but fewer replicas than required "
        "acknowledged it in time, so a failover could still lose it. Retry with the "
        "same Idempotency-Key after Retry-After seconds: you get it replayed once it "
        "is safe, or applied once if it was lost."),
    "replay-unavailable": (409, "The first response was not stored",
        "The key was used by a request that stored no response, so there is nothing to "
        "replay. Use a new key."),
    "invalid-cursor": (400, "Invalid cursor",
        "A live stream resumes after the seq in Last-Event-ID (or ?after=): a whole number "
        "from 0 to 9223372036854775807. Send the id of the last event received, or none. "
        "A history page (GET .../{pk}/history/) starts at the ?cursor= its previous page's "
        "next link gave; follow that link as it is."),
    "forbidden": (403, "Not allowed",
        "The request's user may not do this: the machine's permissions refused the event "
        "(the detail and the event member name it; nothing was written), or the live "
        "stream's permission (XSM['STREAM']['PERMISSION']) refused to let it follow the "
        "instance. Log in as a user they allow."),
    "audit-disabled": (404, "The transition log is disabled",
        "The live stream and the history endpoint send the records of the transition log, "
        "and this deployment keeps none (XSM['AUDIT']['ENABLED'] is False). Enable the "
        "audit log to stream or list them."),
    "too-many-streams": (503, "Too many open streams",
        "This server process has as many live streams open as XSM['STREAM']"
        "['MAX_CONNECTIONS'] allows. Retry after Retry-After seconds."),
}  # fmt: skip


def problem_type_uri(request: HttpRequest | None, slug: str) -> str:
    """The ``type`` of a problem: this deployment's page for ``slug``
    (``/_xsm/problems/<slug>``), or ``about:blank`` (RFC 9457: no more
    than the status says) for a slug it does not document or when
    ``django_xsm.urls`` is not mounted."""
    if slug not in PROBLEM_TYPES:
        return "about:blank"
    try:
        path = reverse("django_xsm:problem", args=[slug])
    except NoReverseMatch:
        return "about:blank"
    return request.build_absolute_uri(path) if request is not None else path


REPLAYED_HEADER = "Idempotent-Replayed"
PROBLEM_CONTENT_TYPE = "application/problem+json"
#: Response headers stored with an idempotent response and replayed.
REPLAYED_HEADERS = ("Location", "Content-Language", "Content-Disposition")


#: Which problem each error is, most specific class first (several share
#: StoreError as a base), and whether a retry can succeed (Retry-After).
#: StoreAuthenticationError has none: the credentials must change first.
_PROBLEM_OF_ERROR: tuple[tuple[type[XsmError], str, bool], ...] = (
    (IdempotencyKeyError, "idempotency-key", False),
    (InvalidEventError, "invalid-event", False),
    (PayloadTooLargeError, "payload-too-large", False),
    (SnapshotTooLargeError, "snapshot-too-large", False),  # the new snapshot only
    (IdempotencyInFlightError, "in-flight", True),
    (IdempotencyMismatchError, "idempotency-mismatch", False),
    (UnknownEventError, "unknown-event", False),
    (EventNotAcceptedError, "event-not-accepted", False),
    (ReservedEventError, "reserved-event", False),
    (EventPermissionError, "forbidden", False),
    (LockTimeoutError, "locked", True),
    (ConflictError, "conflict", True),
    (InstanceNotFoundError, "not-found", False),
    (NotDurableError, "not-durable", True),
    (StoreUnavailableError, "unavailable", True),
    (UnstorableValueError, "unstorable-value", False),
    (StoreAuthenticationError, "store-misconfigured", False),
    (MigrationError, "machine-changed", False),
)


def _classify(exc: XsmError) -> tuple[str, bool] | None:
    """The problem slug of ``exc`` and whether a retry can succeed."""
    if isinstance(exc, SnapshotTooLargeError) and exc.stored:
        return None  # a record stored under a larger limit: the operator's, a 500
    for cls, slug, retry in _PROBLEM_OF_ERROR:
        if isinstance(exc, cls):
            return slug, retry
    return None


def wants_json(request: HttpRequest | None) -> bool:
    """False only for clients that accept HTML and not JSON (browsers)."""
    if request is None:
        return True
    accept = request.META.get("HTTP_ACCEPT", "").lower()
    return not ("text/html" in accept and "json" not in accept)


def problem_response(
    request: HttpRequest | None,
    status: int,
    slug: str,
    title: str,
    detail: str,
    *,
    retry_after: int | None = None,
    **extensions: Any,
) -> HttpResponse:
    """An RFC 9457 problem response (or text/plain for HTML clients)."""
    if wants_json(request):
        body: dict[str, Any] = {
            "type": problem_type_uri(request, slug),
            "title": title,
            "status": status,
            "detail": detail,
        }
        if retry_after is not None:
            body["retry_after"] = retry_after
        body.update({k: v for k, v in extensions.items() if v is not None})
        text = json.dumps(body, default=str, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # a client's value echoed back (an event type) holds a lone
            # surrogate: JSON's \ud800 escape carries it, UTF-8 cannot
            text = json.dumps(body, default=str)
        response = HttpResponse(text, status=status, content_type=PROBLEM_CONTENT_TYPE)
    else:
        plain = f"{title}: {detail}\n".encode("utf-8", "backslashreplace")
        response = HttpResponse(plain, status=status, content_type="text/plain; charset=utf-8")
    if retry_after is not None:
        response["Retry-After"] = str(max(1, int(retry_after)))
    return response


def documented_problem(
    request: HttpRequest | None,
    slug: str,
    detail: str,
    *,
    retry_after: int | None = None,
    **extensions: Any,
) -> HttpResponse:
    """The problem response of a slug of :data:`PROBLEM_TYPES`, with its
    status and title."""
    status, title, _ = PROBLEM_TYPES[slug]
    return problem_response(
        request, status, slug, title, detail, retry_after=retry_after, **extensions
    )


def error_response(exc: XsmError, request: HttpRequest | None) -> HttpResponse | None:
    """The response for ``exc``, or None to let Django handle it (an
    unmapped error while ``DEBUG`` is on, so the debug page shows it)."""
    found = _classify(exc)
    if found is None:
        if settings.DEBUG:
            return None
        logger.error("Unhandled %s in a django-xsm view", type(exc).__name__, exc_info=exc)
        return documented_problem(request, "internal", "The server could not process the request")
    slug, retryable = found
    if isinstance(exc, StoreAuthenticationError):
        # an operator must act: one clear line (no password, no host)
        logger.error("Redis refused django-xsm's credentials: %s", exc.message)
    elif isinstance(exc, MigrationError):
        # a deployment error, not the client's: one line saying what to do
        logger.error(
            "A stored instance of machine %r cannot be loaded by this code: %s; see "
            "'Changing a chart' in docs/models.md (manage.py check --deploy: xsm.E015)",
            exc.machine_id,
            exc,
        )
    retry = int(getattr(exc, "retry_after_s", 1) or 1) if retryable else None
    extra: dict[str, Any] = {}
    if isinstance(exc, UnknownEventError):
        extra = {"event": exc.event_type, "reason": exc.reason, "suggestions": exc.suggestions}
    elif isinstance(exc, EventNotAcceptedError):
        extra = {"event": exc.event_type, "state": exc.value, "reason": exc.reason or None}
        if exc.guards:
            extra["guards"] = list(exc.guards)
    elif isinstance(exc, ReservedEventError):
        extra = {"event": exc.event_type, "namespace": exc.namespace}
    elif isinstance(exc, EventPermissionError):
        extra = {"event": exc.event_type}
    elif isinstance(exc, IdempotencyMismatchError | IdempotencyInFlightError):
        extra = {"idempotency_key": exc.idempotency_key}
    elif isinstance(exc, ConflictError):
        extra = {"key": exc.key, "expected_version": exc.expected, "actual_version": exc.actual}
    elif isinstance(exc, InstanceNotFoundError | LockTimeoutError):
        extra = {"key": exc.key}
    elif isinstance(exc, NotDurableError):
        extra = {"replicas_required": exc.required, "replicas_acknowledged": exc.acknowledged}
    elif isinstance(exc, PayloadTooLargeError):
        extra = {"event": exc.event_type, "max_bytes": exc.limit}
    # The message, not str(exc): hints speak to developers, not API clients.
    return documented_problem(request, slug, exc.message, retry_after=retry, **extra)


def invalid_key_response(request: HttpRequest, detail: str) -> HttpResponse:
    """400 for an instance key built from URL values that is not a valid key."""
    return documented_problem(request, "invalid-key", detail)


def body_too_large_response(request: HttpRequest | None) -> HttpResponse:
    """413 for a request body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (Django's
    ``RequestDataTooBig``): nothing was read past the limit, nothing written."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    detail = f"The request body is larger than the {limit} bytes this server reads"
    return documented_problem(request, "payload-too-large", detail, max_bytes=limit)


# --- idempotent responses ------------------------------------------------------------


def request_fingerprint(request: HttpRequest) -> str:
    """SHA-256 over method, full path, content type and body: what makes a
    retry "the same request" (same key + other fingerprint is a 422)."""
    digest = hashlib.sha256()
    for part in (request.method or "", request.get_full_path(), request.content_type or ""):
        digest.update(part.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
    try:
        digest.update(request.body)
    except RawPostDataException:
        # A multipart body was already streamed into POST/FILES (by CSRF
        # middleware, say): hash what was parsed instead.
        for name, values in sorted(request.POST.lists()):
            digest.update(json.dumps([name, values]).encode())
        for name, files in sorted(request.FILES.lists()):
            digest.update(json.dumps([name, [(f.name, f.size) for f in files]]).encode())
    return digest.hexdigest()


def capture_response(response: HttpResponseBase, limit: int) -> dict[str, Any]:
    """What a duplicate of this request gets back (JSON-ready): status,
    content type, the replayed headers and the body (UTF-8 text, else
    base64) when it is at most ``limit`` bytes and not streamed."""
    stored: dict[str, Any] = {
        "status": response.status_code,
        "content_type": response.get("Content-Type", ""),
        "headers": {h: response[h] for h in REPLAYED_HEADERS if h in response},
        "body": None,
        "encoding": "",
    }
    if getattr(response, "streaming", False) or not isinstance(response, HttpResponse):
        stored["omitted"] = "streaming"
        return stored
    body = response.content
    if len(body) > limit:
        stored["omitted"] = f"body over {limit} bytes"
        return stored
    try:
        stored["body"], stored["encoding"] = body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        stored["body"], stored["encoding"] = base64.b64encode(body).decode("ascii"), "base64"
    return stored


def replay_response(stored: Any, request: HttpRequest | None) -> HttpResponse:
    """Rebuild the first attempt's response, marked ``Idempotent-Replayed``.

    A body that was not stored (streamed or over the limit) replays as an
    empty body with the original status and headers.
    """
    if not isinstance(stored, Mapping) or not isinstance(stored.get("status"), int):
        response = problem_response(
            request,
            409,
            "replay-unavailable",
            "Duplicate request",
            "This idempotency key was already used; its response was not stored",
        )
        response[REPLAYED_HEADER] = "true"
        return response
    raw = stored.get("body")
    if raw is None:
        body = b""
    elif stored.get("encoding") == "base64":
        body = base64.b64decode(raw)
    else:
        body = str(raw).encode("utf-8")
    response = HttpResponse(
        body, status=stored["status"], content_type=stored.get("content_type") or None
    )
    for name, value in dict(stored.get("headers") or {}).items():
        if name in REPLAYED_HEADERS:
            response[name] = value
    response[REPLAYED_HEADER] = "true"
    return response
