"""The OpenAPI schema of the DRF integration (drf-spectacular extensions).

Imported by ``django_xsm.contrib.drf`` only when drf-spectacular is
installed; defining the classes registers them with drf-spectacular.

``events`` and ``history`` are annotated when a schema is generated, not
when the mixin is imported: ``extend_schema`` reads
``DEFAULT_SCHEMA_CLASS`` when it decorates, which would tie the actions to
the settings of import time (and break DRF's own schema generator where
drf-spectacular is installed but unused). Generating late also names the
viewset's own events and whether its ``Idempotency-Key`` is required under
the current settings. A viewset that annotates them itself keeps its own.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import (
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
    OpenApiViewExtension,
)
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import (
    Direction,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework.views import APIView

from django_xsm import conf, http
from django_xsm.registry import machines

from .mixins import StatechartEventsMixin, required_methods
from .problems import PROBLEM_CONTENT_TYPE
from .serializers import (
    ProblemSerializer,
    StatechartEventResultSerializer,
    StatechartHistorySerializer,
)

__all__ = [
    "StatechartEventSerializerSchema",
    "StatechartEventsViewSchema",
    "StatechartSerializerFieldSchema",
    "events_operation",
    "history_operation",
]

#: Each error status of the endpoint and the problem types it stands for
#: (docs/http.md; the keys of django_xsm.http.PROBLEM_TYPES plus about:blank).
ERROR_STATUSES: dict[int, str] = {
    400: "The body has no string type, or the Idempotency-Key is missing or "
    "malformed (idempotency-key), or the row gives an invalid instance key (invalid-key).",
    403: "The event type is reserved for django-xsm itself, xstate.* or xsm.* "
    "(reserved-event); the user may not send this event (the machine's PERMISSIONS); or "
    "DRF's authentication and permission classes refused the request.",
    404: "No such row (not-found).",
    413: "The request body is larger than the server reads, or the event's payload is "
    "larger than XSM['MAX_PAYLOAD_BYTES'] (payload-too-large).",
    409: "The event is not accepted in the current state (event-not-accepted); or, with "
    "Retry-After: a version conflict after the retries (conflict), the instance is "
    "locked (locked), or a request with this key is in flight (in-flight).",
    422: "No state of the chart takes the event type, a typo (unknown-event, with the "
    "closest types in suggestions); the key was used for another request "
    "(idempotency-mismatch); a value cannot be stored exactly or is nested too deep "
    "(unstorable-value); or the event would make the instance larger than "
    "XSM['MAX_SNAPSHOT_BYTES'] (snapshot-too-large).",
    500: "The store refused the server's credentials (store-misconfigured), the instance "
    "was stored by another version of its chart (machine-changed), or another server error "
    "(internal).",
    503: "With Retry-After: the store is unavailable (unavailable), or the commit is not "
    "yet on enough replicas (not-durable).",
}

#: The error statuses of the history endpoint.
HISTORY_ERROR_STATUSES: dict[int, str] = {
    400: "The cursor is not one a page's next link gave (invalid-cursor), page_size is "
    "not a whole number from 1, or the row gives an invalid instance key (invalid-key).",
    403: "DRF's authentication and permission classes refused the request (those of the "
    "detail view: the row comes from get_object()).",
    404: "No such row (not-found), or the deployment keeps no transition log (audit-disabled).",
    500: "The store refused the server's credentials (store-misconfigured), or another "
    "server error (internal).",
    503: "With Retry-After: the store is unavailable (unavailable).",
}

_EVENT_ITEM = {
    "type": "object",
    "properties": {"type": {"type": "string"}, "conditional": {"type": "boolean"}},
    "required": ["type", "conditional"],
}


def _event_types(view: Any) -> list[str] | None:
    """The event types a client may send to the view's machine, or None if
    they are no closed set (a wildcard descriptor takes types it does not
    name) or the view cannot say (no queryset at schema time, an unknown
    machine)."""
    try:
        field = view.get_statechart_field()
        machine = machines[field.machine_name].machine
    except Exception:
        return None
    if machine.chart.wildcards:
        return None
    return list(machine.event_types)


class StatechartSerializerFieldSchema(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """``StatechartSerializerField``: a string, the XState value, or the
    state with its events."""

    target_class = "django_xsm.contrib.drf.serializers.StatechartSerializerField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Direction) -> dict[str, Any]:
        field = self.target
        state: dict[str, Any]
        if field.full_value:
            state = {
                "description": "The XState state value: a string, or an object for compound "
                "and parallel states."
            }
        else:
            state = {"type": "string", "description": "The state column (dotted, comma-joined)."}
        if not field.with_events:
            return state
        return {
            "type": "object",
            "properties": {
                "state": state,
                "events": {
                    "type": "array",
                    "nullable": True,
                    "items": _EVENT_ITEM,
                    "description": "The events the state accepts that the user may send; "
                    "null when the statechart could not be read (its store was unreachable: "
                    "state is then the row's column).",
                },
            },
            "required": ["state", "events"],
        }


class StatechartEventSerializerSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
    """The body of ``events``: ``type`` (one of the machine's events) plus
    any payload members; one component per model (``OrderStatusEvent``)."""

    target_class = "django_xsm.contrib.drf.serializers.StatechartEventSerializer"
    match_subclasses = True

    def get_name(self, auto_schema: Any, direction: Direction) -> str | None:
        try:
            field = auto_schema.view.get_statechart_field()
        except Exception:
            return None
        model = field.model.__name__
        return f"{model}{field.name.title().replace('_', '')}Event"

    def map_serializer(self, auto_schema: Any, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(
            self.target, direction, bypass_extensions=True
        )
        schema["description"] = (
            "An event of this row's statechart: type names it, every other member is its payload."
        )
        schema["additionalProperties"] = True  # the event's payload
        name = self.get_name(auto_schema, direction)
        types = _event_types(auto_schema.view)
        if name is None or types is None or "type" not in schema.get("properties", {}):
            return schema
        # The machine's events as a component of their own (OrderStatusEventType):
        # left inline, drf-spectacular's enum hook would give every model's
        # choice set the one name "TypeEnum" and warn about the collision.
        component = ResolvedComponent(  # type: ignore[no-untyped-call]
            name=f"{name}Type",
            type=ResolvedComponent.SCHEMA,
            object=f"{name}Type",
            schema={"type": "string", "enum": types},
        )
        auto_schema.registry.register_on_missing(component)
        schema["properties"]["type"] = {
            "allOf": [component.ref],
            "description": schema["properties"]["type"].get("description", ""),
        }
        return schema


def events_operation(view_class: type[StatechartEventsMixin]) -> Any:
    """The ``extend_schema`` of ``view_class.events``: its body, the
    ``Idempotency-Key`` header, the 200 answer and every problem status."""
    required = "POST" in required_methods(view_class.statechart_idempotent)
    header = conf.get_settings().idempotency.header
    responses: dict[Any, Any] = {
        200: OpenApiResponse(
            StatechartEventResultSerializer,
            description=f"Committed. A repeated {header} replays this answer with "
            f"{http.REPLAYED_HEADER}: true.",
        ),
    }
    for status, text in ERROR_STATUSES.items():
        responses[(status, PROBLEM_CONTENT_TYPE)] = OpenApiResponse(ProblemSerializer, text)
    return extend_schema(
        summary="Send an event to this row's statechart",
        description=(
            'Sends {"type": ..., ...payload} strictly, as the requesting user, and commits '
            "it once. Errors are RFC 9457 problems (application/problem+json)."
        ),
        request=view_class.statechart_event_serializer_class,
        responses=responses,
        parameters=[
            OpenApiParameter(
                header,
                str,
                OpenApiParameter.HEADER,
                required=required,
                description="A fresh UUID per request, the same value when retrying.",
            ),
            OpenApiParameter(
                "Retry-After",
                int,
                OpenApiParameter.HEADER,
                response=[409, 503],
                description="Seconds to wait before retrying (conflict, locked, in-flight, "
                "unavailable, not-durable).",
            ),
            OpenApiParameter(
                http.REPLAYED_HEADER,
                str,
                OpenApiParameter.HEADER,
                response=[200],
                description="true when this is the stored answer to an earlier request.",
            ),
        ],
    )


def history_operation(view_class: type[StatechartEventsMixin]) -> Any:
    """The ``extend_schema`` of ``view_class.history``: its query
    parameters, the page and every problem status."""
    responses: dict[Any, Any] = {
        200: OpenApiResponse(StatechartHistorySerializer, description="A page, newest first."),
    }
    for status, text in HISTORY_ERROR_STATUSES.items():
        responses[(status, PROBLEM_CONTENT_TYPE)] = OpenApiResponse(ProblemSerializer, text)
    return extend_schema(
        summary="This row's transition records, newest first",
        description=(
            "The records of the row's transition log (payloads redacted), newest first, a "
            "page at a time; follow next for older ones. Errors are RFC 9457 problems "
            "(application/problem+json)."
        ),
        request=None,
        responses=responses,
        parameters=[
            OpenApiParameter(
                "cursor",
                str,
                OpenApiParameter.QUERY,
                description="Where the page starts: the value a page's next link gave.",
            ),
            OpenApiParameter(
                "page_size",
                int,
                OpenApiParameter.QUERY,
                description=f"Records per page (default {view_class.statechart_history_page_size},"
                f" at most {view_class.statechart_history_max_page_size}).",
            ),
            OpenApiParameter(
                "Retry-After",
                int,
                OpenApiParameter.HEADER,
                response=[503],
                description="Seconds to wait before retrying (unavailable).",
            ),
        ],
    )


class StatechartEventsViewSchema(OpenApiViewExtension):  # type: ignore[no-untyped-call]
    """Annotates ``events`` and ``history`` on every viewset with the mixin,
    at schema time (each one the viewset did not annotate itself)."""

    target_class = "django_xsm.contrib.drf.mixins.StatechartEventsMixin"
    match_subclasses = True

    def view_replacement(self) -> type[APIView]:
        target: type[StatechartEventsMixin] = self.target
        operations = {
            name: build(target)
            for name, build in (("events", events_operation), ("history", history_operation))
            if "schema" not in getattr(getattr(target, name), "kwargs", {})
        }
        if not operations:
            return target  # the viewset annotated its endpoints itself
        annotated = type(target.__name__, (target,), {"__module__": target.__module__})
        result: type[APIView] = extend_schema_view(**operations)(annotated)
        return result
