"""Liveness and readiness endpoints (mounted by ``django_xsm.urls``), and
the page of each problem ``type`` of :mod:`django_xsm.http`.

``/_xsm/health`` does no I/O, so a slow or absent Redis never gets a
healthy worker restarted; what ``/_xsm/ready`` checks and answers:
docs/http.md. Neither body ever names a host, port or credential.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from django_xsm import backend
from django_xsm.exceptions import StoreUnavailableError, XsmError
from django_xsm.http import PROBLEM_TYPES
from django_xsm.outbox import outbox_health
from django_xsm.registry import machines

__all__ = ["READY_RETRY_AFTER_S", "health", "problem", "ready"]

#: Retry-After of a 503 from the readiness endpoint.
READY_RETRY_AFTER_S = 5


def _not_ready(reason: str) -> JsonResponse:
    response = JsonResponse({"status": "unavailable", "reason": reason}, status=503)
    response["Retry-After"] = str(READY_RETRY_AFTER_S)
    return response


@csrf_exempt  # no cookies read, nothing changed: a POST is a 405, not a CSRF 403
@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    """Liveness: 200 ``{"status": "ok"}``."""
    return JsonResponse({"status": "ok"})


@csrf_exempt
@never_cache
@require_safe
def ready(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 with the store's latency, or 503 + Retry-After with
    ``reason`` ``"configuration"`` or ``"store"``."""
    try:
        found = backend.get_backend()
        problems = machines.problems
    except StoreUnavailableError:
        return _not_ready("store")
    except (ImproperlyConfigured, XsmError):
        # a namespace with a newer layout, another bucket count, an
        # unreadable schema marker...: a deployment problem, not an outage
        return _not_ready("configuration")
    if problems:
        return _not_ready("configuration")
    info = found.store.health()  # never raises, bounded by the socket timeout
    if not info.get("ok"):
        # refused credentials are the deployment's to fix, not an outage
        return _not_ready("configuration" if info.get("credentials_refused") else "store")
    body = {
        "status": "ready",
        "store": found.description,
        "latency_ms": info.get("latency_ms"),
        "machines": machines.names(),
    }
    if info.get("namespace_reset"):
        # still ready (the store works), but Redis lost this namespace's
        # data since this process first saw it: an operator must know
        body["namespace_reset"] = True
    # the outbox's backlog, for dashboards and alerts (lag_ms, dead > 0);
    # informative: a worker problem does not make this process unready
    outbox = outbox_health()
    body["outbox"] = {k: outbox[k] for k in ("pending", "retrying", "dead", "lag_ms")}
    return JsonResponse(body)


@require_safe
def problem(request: HttpRequest, slug: str) -> HttpResponse:
    """The page a problem's ``type`` URI points at: what it means, what to do."""
    found = PROBLEM_TYPES.get(slug)
    if found is None:
        raise Http404("No such problem type")
    status, title, text = found
    return render(
        request,
        "django_xsm/problem.html",
        {"slug": slug, "status": status, "title": title, "text": text},
    )
