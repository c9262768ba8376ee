"""``StatechartEventsMixin``: ``POST .../{pk}/events/`` and
``GET .../{pk}/history/`` on a DRF viewset.

::

    class OrderViewSet(StatechartEventsMixin, viewsets.ModelViewSet):
        queryset = Order.objects.all()
        serializer_class = OrderSerializer
        statechart_field = "status"         # default: the model's only StatechartField

    POST /orders/7/events/   Idempotency-Key: 3f0c...   {"type": "PAY", "amount": 10}

The events endpoint behaves as ``@stateful_view(model=Order)`` does, so a
client sees one HTTP contract (docs/http.md) whichever of the two serves
it; the row comes from ``get_object()`` for both endpoints. The steps, the
history pages and every answer: docs/drf.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured, RequestDataTooBig
from django.db import models
from django.http import Http404, HttpResponse, HttpResponseBase
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import set_rollback

from django_xsm import backend, conf, http
from django_xsm.engine.run.context import too_deep
from django_xsm.exceptions import EventPermissionError, InvalidConfigError, XsmError
from django_xsm.fields import BoundStatechart, StatechartField, project_value
from django_xsm.fields.events import available_events, may_send
from django_xsm.fields.row_lookup import RowNotFoundError
from django_xsm.middleware import RequestInfo
from django_xsm.persistence import retry_on_conflict
from django_xsm.persistence.arguments import validate_key
from django_xsm.persistence.block import PersistedInstance
from django_xsm.persistence.locks import LockStrategy

from .history import parse_cursor, parse_page_size, read_page
from .problems import (
    ProblemResponse,
    api_problem,
    body_too_large_problem,
    documented_problem,
    invalid_key_problem,
    problem,
    problem_for_error,
    replayed_response,
)
from .serializers import StatechartEventSerializer, describe_events

__all__ = ["StatechartEventsMixin", "required_methods", "statechart_field_of"]

if TYPE_CHECKING:
    _ViewSet = viewsets.GenericViewSet[models.Model]
else:
    _ViewSet = viewsets.GenericViewSet

_ACTION = "events"
_HISTORY = "history"


def statechart_field_of(model: type[models.Model], name: str | None) -> StatechartField:
    """The StatechartField ``name`` of ``model``, or its only one."""
    found = [f for f in model._meta.get_fields() if isinstance(f, StatechartField)]
    if name is not None:
        for field in found:
            if field.name == name:
                return field
        raise ImproperlyConfigured(
            f"statechart_field = {name!r}: {model._meta.label} has no StatechartField {name!r} "
            f"(it has: {', '.join(f.name for f in found) or 'none'})"
        )
    if len(found) != 1:
        raise ImproperlyConfigured(
            f"{model._meta.label} has {len(found)} StatechartFields; set statechart_field = "
            f"one of {', '.join(f.name for f in found) or 'them (it has none)'}"
        )
    return found[0]


def required_methods(idempotent: bool | None) -> frozenset[str]:
    """The methods on which the endpoint needs an Idempotency-Key: the
    ``XSM['IDEMPOTENCY']['REQUIRED']`` setting (read per request, so an
    override applies), or POST / none when the viewset says so."""
    if idempotent is None:
        return conf.get_settings().idempotency.required
    return frozenset({"POST"}) if idempotent else frozenset()


def _request_info(request: Request) -> RequestInfo:
    """Who acts and whose idempotency scope a key is in, read from the user
    DRF authenticated (a token user is not the session's).

    A ``request.xsm`` that XsmMiddleware made earlier may have resolved its
    actor before DRF's authentication ran, so a fresh one is read here; it
    keeps the middleware's correlation id (echoed in X-Request-ID).
    """
    django_request = request._request
    info = RequestInfo(django_request)
    earlier = getattr(django_request, "xsm", None)
    if isinstance(earlier, RequestInfo):
        info.correlation_id = earlier.correlation_id
    return info


class StatechartEventsMixin(_ViewSet):
    """Adds ``POST .../{pk}/events/`` to a ``ModelViewSet`` or
    ``GenericViewSet`` (see the module docstring)."""

    #: The model's StatechartField to send to; None: its only one.
    statechart_field: str | None = None
    #: ``"adaptive"``, ``"optimistic"``, ``"pessimistic"``, a LockStrategy, or None
    #: for ``XSM['LOCK']``.
    statechart_lock: str | LockStrategy | None = None
    #: Optimistic conflict re-runs; None for ``XSM['CONFLICT_RETRIES']``.
    statechart_retries: int | None = None
    #: Whether POST needs an Idempotency-Key; None: ``XSM['IDEMPOTENCY']['REQUIRED']``.
    #: A key that is sent is honoured (and validated) either way.
    statechart_idempotent: bool | None = None
    #: The body's serializer (and the browsable API's form).
    statechart_event_serializer_class: type[serializers.Serializer] = StatechartEventSerializer  # type: ignore[type-arg]
    #: Records per page of ``history`` without ``?page_size=``, and the most it may ask.
    statechart_history_page_size: int = 50
    statechart_history_max_page_size: int = 200

    _xsm_fingerprint = ""

    # --- hooks -----------------------------------------------------------------------

    def get_statechart_field(self) -> StatechartField:
        """The field the endpoint sends to (``statechart_field``)."""
        return statechart_field_of(self.get_queryset().model, self.statechart_field)

    def perform_event(
        self, block: PersistedInstance, row: models.Model, event: dict[str, Any]
    ) -> Any:
        """Send ``event`` (``{"type": ..., **payload}``) in the open block;
        returns the receipt. Override to send more, or to check the payload
        first; raise a DRF ``ValidationError`` to refuse it (nothing is
        written and the key is released)."""
        return block.send(event)

    def get_event_response_data(
        self, row: models.Model, block: PersistedInstance, event: dict[str, Any], receipt: Any
    ) -> dict[str, Any]:
        """The 200 body (``StatechartEventResultSerializer``), built inside
        the block because it is stored with the commit for replays: the
        event, the new state column and value, whether anything changed,
        and the events this user may send next."""
        bound = self._bound(row)
        events = available_events(bound.entry, block, user=self.request.user, target=row)
        return {
            "type": event["type"],
            "state": project_value(block.value),
            "value": block.value,
            "changed": bool(getattr(receipt, "changed", False)),
            "events": describe_events(events),
        }

    # --- DRF plumbing ----------------------------------------------------------------

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:  # type: ignore[type-arg]
        if getattr(self, "action", None) == _ACTION:
            return self.statechart_event_serializer_class
        return super().get_serializer_class()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Hash the body before authentication: a CSRF check may parse a form
        # post and consume the stream, and the fingerprint must cover the
        # bytes the client sent (the same key with another body is a 422).
        if getattr(self, "action", None) == _ACTION and request.method not in conf.SAFE_METHODS:
            self._xsm_fingerprint = http.request_fingerprint(request._request)
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc: Exception) -> Response:
        """A django-xsm error from any action of the viewset (a store outage
        in ``perform_create``, say) is its problem, as behind XsmMiddleware,
        and rolls back an ``ATOMIC_REQUESTS`` transaction as DRF's errors do;
        DRF's own errors on the events endpoint are problems too."""
        if isinstance(exc, XsmError):
            found = problem_for_error(exc, self.request)  # re-raises for Django's debug page
            found.exception = True
            # As DRF's own handler does: an ATOMIC_REQUESTS transaction rolls
            # back, so a problem answer never leaves the action's rows behind.
            set_rollback()
            return found
        if isinstance(exc, RequestDataTooBig) and getattr(self, "action", None) == _ACTION:
            # initial() hashes the body: over DATA_UPLOAD_MAX_MEMORY_SIZE, a 413
            too_big = body_too_large_problem(self.request)
            too_big.exception = True
            return too_big
        response = super().handle_exception(exc)
        if self._on_our_route() and not isinstance(response, ProblemResponse):
            return api_problem(response, getattr(self, "request", None))
        return response

    def _on_our_route(self) -> bool:
        """Whether the request is on the events or history URL, whatever
        its method: DRF sets no ``action`` for a method the route does not
        map (``POST .../history/`` is a 405), so the route's map says."""
        if getattr(self, "action", None) in (_ACTION, _HISTORY):
            return True
        routed = set((getattr(self, "action_map", None) or {}).values())
        return bool(routed) and routed <= {_ACTION, _HISTORY}

    # --- the endpoint ----------------------------------------------------------------

    def _bound(self, row: models.Model) -> BoundStatechart:
        bound = getattr(row, self.get_statechart_field().name)
        assert isinstance(bound, BoundStatechart)
        return bound

    def _row(self) -> models.Model:
        try:
            return self.get_object()
        except Http404:
            name = self.lookup_url_kwarg or self.lookup_field
            value = self.kwargs.get(name, "")
            model = self.get_queryset().model
            raise RowNotFoundError(model, self.lookup_field, value) from None

    def _fingerprint(self, request: Request) -> str:
        # initial() hashed the body before anything could consume it; a
        # subclass whose initial() skips ours still gets a fingerprint.
        return self._xsm_fingerprint or http.request_fingerprint(request._request)

    def _attempts(self) -> int:
        retries = self.statechart_retries
        return 1 + (conf.get_settings().conflict_retries if retries is None else retries)

    @action(detail=True, methods=["post"], url_path="events", url_name="events")
    def events(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Send one event to this row's statechart: ``{"type": "PAY", ...payload}``
        with an ``Idempotency-Key`` header."""
        try:
            return self._send_event(request)
        except XsmError as exc:
            return problem_for_error(exc, request)

    def _send_event(self, request: Request) -> HttpResponseBase:
        row = self._row()
        bound = self._bound(row)
        try:
            validate_key(bound.key)
        except InvalidConfigError as exc:
            return invalid_key_problem(request, exc.message)
        info = _request_info(request)
        idem = info.key_for(request.method or "POST", required_methods(self.statechart_idempotent))
        try:
            data = request.data
        except RecursionError:
            # Python 3.11 and 3.12's json parser: a body nested ~1000 levels
            # deep; refused like one nested past the engine's limit
            raise too_deep("payload") from None
        serializer = self.get_serializer(data=data)
        serializer.is_valid(raise_exception=True)
        event: dict[str, Any] = dict(serializer.validated_data)
        etype = str(event["type"])
        entry = bound.entry
        entry.machine.check_sendable(etype)  # reserved or unknown: a problem, before any I/O
        if not may_send(entry, etype, request.user, row):
            # the refusal of @stateful_view, word for word: 403 forbidden
            refused = EventPermissionError(
                etype, machine=entry.name, target=str(row._meta.verbose_name)
            )
            return problem_for_error(refused, request)
        options: dict[str, Any] = {
            "actor": info.actor,
            "idempotency_key": idem,
            "fingerprint": self._fingerprint(request) if idem is not None else "",
            "principal": info.principal if idem is not None else "",
            "create": True,
            "strict": True,
            "correlation_id": info.correlation_id,
        }
        limit = conf.get_settings().idempotency.max_response_bytes

        def attempt(lock: LockStrategy) -> HttpResponseBase:
            with bound.open(**options, lock=lock) as block:
                if block.duplicate:
                    return replayed_response(block.replayed_result, request)
                receipt = self.perform_event(block, row, dict(event))
                data = self.get_event_response_data(row, block, event, receipt)
                if idem is not None:
                    # JSON whatever this client negotiated: a replay is
                    # rendered for the client that sends it.
                    stored = HttpResponse(
                        JSONRenderer().render(data), content_type="application/json"
                    )
                    block.set_result(http.capture_response(stored, limit))
                return Response(data)

        return retry_on_conflict(
            attempt, attempts=self._attempts(), lock=backend.lock_strategy(self.statechart_lock)
        )

    @action(detail=True, methods=["get"], url_path="history", url_name="history")
    def history(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """This row's transition records, newest first, a page at a time
        (``?cursor=`` from the ``next`` link, ``?page_size=``)."""
        try:
            return self._history(request)
        except XsmError as exc:
            return problem_for_error(exc, request)

    def _history(self, request: Request) -> HttpResponseBase:
        bound = self._bound(self._row())
        try:
            validate_key(bound.key)
        except InvalidConfigError as exc:
            return invalid_key_problem(request, exc.message)
        if not conf.get_settings().audit.enabled:
            detail = (
                "This row's history is its transition log, and XSM['AUDIT']['ENABLED'] is False"
            )
            return documented_problem(request, "audit-disabled", detail)
        params = request.query_params
        detail = "cursor must be the value a history page's next link gave"
        try:
            cursor = parse_cursor(params.get("cursor"))
        except ValueError:
            return documented_problem(request, "invalid-cursor", detail)
        maximum = self.statechart_history_max_page_size
        try:
            size = parse_page_size(
                params.get("page_size"), self.statechart_history_page_size, maximum
            )
        except ValueError:
            detail = f"page_size must be a whole number from 1 (at most {maximum} are sent)"
            return problem(request, 400, detail)
        page = read_page(backend.get_log(), bound.key, cursor, size)
        if page is None:  # past the log's end
            return documented_problem(request, "invalid-cursor", detail)
        link = None
        if page.next_cursor is not None:
            link = replace_query_param(
                request.build_absolute_uri(), "cursor", str(page.next_cursor)
            )
        return Response({"next": link, "results": [r.to_dict() for r in page.records]})
