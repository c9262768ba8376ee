"""RFC 9457 problem bodies as DRF responses, built from :mod:`django_xsm.http`.

The status, ``type``, ``title``, ``detail``, ``Retry-After`` and extension
members of an ``XsmError`` all come from ``django_xsm.http.error_response``,
the function ``@stateful_view`` answers with: this module only moves its
JSON body into a DRF :class:`~rest_framework.response.Response`, so that
content negotiation still applies (the browsable API shows the problem as a
page) and the two endpoints cannot drift apart.

DRF's own errors on the events endpoint (a body that does not validate,
authentication, throttling) become problems of type ``about:blank``, whose
``title`` is the HTTP status phrase, as RFC 9457 asks for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from django.http import HttpResponse, HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response

from django_xsm import http
from django_xsm.exceptions import XsmError

__all__ = [
    "PROBLEM_CONTENT_TYPE",
    "ProblemResponse",
    "api_problem",
    "body_too_large_problem",
    "documented_problem",
    "invalid_key_problem",
    "problem",
    "problem_for_error",
    "replayed_response",
]

PROBLEM_CONTENT_TYPE = http.PROBLEM_CONTENT_TYPE

#: Headers of a DRF error response that a problem keeps (authentication
#: challenges, throttling, the methods a 405 allows).
_KEPT_HEADERS = ("WWW-Authenticate", "Retry-After", "Allow")


class ProblemResponse(Response):
    """A DRF response whose JSON rendering is ``application/problem+json``.

    The renderer is still negotiated: JSON renderers produce the problem
    document under the problem media type, the browsable API renders it as
    a page (so a browser sees the problem instead of a download).
    """

    @property
    def rendered_content(self) -> Any:
        renderer = getattr(self, "accepted_renderer", None)
        media_type = str(getattr(renderer, "media_type", ""))
        if self.content_type is None and media_type.partition(";")[0].strip().endswith("json"):
            self.content_type = PROBLEM_CONTENT_TYPE
        return super().rendered_content


def _absolute_type(body: dict[str, Any], request: Request | None) -> dict[str, Any]:
    # http builds the type without a request (so that it always answers
    # JSON); a relative /_xsm/problems/<slug> becomes this host's URI.
    uri = body.get("type")
    if request is not None and isinstance(uri, str) and uri.startswith("/"):
        body["type"] = request.build_absolute_uri(uri)
    return body


def _from_django(response: HttpResponse, request: Request | None) -> ProblemResponse:
    body = _absolute_type(json.loads(response.content), request)
    headers = {name: response[name] for name in _KEPT_HEADERS if name in response}
    return ProblemResponse(body, status=response.status_code, headers=headers)


def problem_for_error(exc: XsmError, request: Request) -> ProblemResponse:
    """The problem ``@stateful_view`` would answer ``exc`` with.

    Re-raises ``exc`` when django_xsm.http leaves it to Django (an unmapped
    error while ``DEBUG`` is on): the debug page then shows it, as it does
    for a decorated view.
    """
    # request=None: the JSON form whatever the client's Accept header says;
    # DRF's content negotiation decides how it is finally rendered.
    response = http.error_response(exc, None)
    if response is None:
        raise exc
    return _from_django(response, request)


def invalid_key_problem(request: Request, detail: str) -> ProblemResponse:
    """400 ``invalid-key``: the row gives an instance key that is no valid key."""
    return documented_problem(request, "invalid-key", detail)


def documented_problem(request: Request, slug: str, detail: str) -> ProblemResponse:
    """The problem of ``slug`` (a key of ``django_xsm.http.PROBLEM_TYPES``)."""
    return _from_django(http.documented_problem(None, slug, detail), request)


def body_too_large_problem(request: Request) -> ProblemResponse:
    """413 ``payload-too-large``: a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""
    return _from_django(http.body_too_large_response(None), request)


def problem(
    request: Request | None,
    status: int,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> ProblemResponse:
    """An ``about:blank`` problem: one that the status code explains, for
    the errors django_xsm.http has no problem type of its own for."""
    response = http.problem_response(
        None, status, "about:blank", HTTPStatus(status).phrase, detail, **extensions
    )
    made = _from_django(response, request)
    for name, value in (headers or {}).items():
        made[name] = value
    return made


def _summary(data: Any) -> str:
    if isinstance(data, Mapping) and isinstance(data.get("detail"), str):
        return str(data["detail"])
    if isinstance(data, list) and data and all(isinstance(item, str) for item in data):
        return "; ".join(data)
    return "The request body is invalid; see errors."


def api_problem(response: Response, request: Request | None) -> ProblemResponse:
    """A DRF error response (``{"detail": ...}`` or validation errors) as a
    problem: ``detail`` is DRF's message and the field errors, if any, are
    the ``errors`` member."""
    data = response.data
    only_detail = isinstance(data, Mapping) and set(data) == {"detail"}
    extensions: dict[str, Any] = {} if only_detail else {"errors": data}
    retry = response.get("Retry-After")
    if retry is not None and retry.isdecimal() and len(retry) <= 18:
        extensions["retry_after"] = int(retry)
    headers = {name: response[name] for name in _KEPT_HEADERS if name in response}
    made = problem(request, response.status_code, _summary(data), headers=headers, **extensions)
    made.exception = True
    return made


def replayed_response(stored: Any, request: Request) -> HttpResponseBase:
    """The response stored with the first request of an idempotency key,
    marked ``Idempotent-Replayed: true`` (django_xsm.http rebuilds it).

    A JSON body becomes a DRF response again, so a replay is negotiated
    like the first answer was (JSON for API clients, a page in the
    browsable API); anything else (an omitted body, another content type)
    is returned exactly as http rebuilt it.
    """
    rebuilt = http.replay_response(stored, None)
    media_type = rebuilt.get("Content-Type", "").partition(";")[0].strip()
    if media_type not in ("application/json", PROBLEM_CONTENT_TYPE):
        return rebuilt
    try:
        data = json.loads(rebuilt.content)
    except ValueError:
        return rebuilt
    names = (*http.REPLAYED_HEADERS, http.REPLAYED_HEADER)
    headers = {name: rebuilt[name] for name in names if name in rebuilt}
    if media_type == PROBLEM_CONTENT_TYPE:
        if isinstance(data, dict):
            _absolute_type(data, request)
        return ProblemResponse(data, status=rebuilt.status_code, headers=headers)
    return Response(data, status=rebuilt.status_code, headers=headers)
