"""Serializers of the DRF integration.

* :class:`StatechartSerializerField` shows a row's ``StatechartField``: the
  state column (no Redis I/O), or the full XState value, and optionally the
  events the requesting user may send now.
* :class:`StatechartEventSerializer` validates the body of
  ``POST .../{pk}/events/``: ``{"type": "PAY", ...payload}``. It is the form
  the browsable API shows for the endpoint.
* :class:`StatechartEventResultSerializer`, :class:`StatechartHistorySerializer`
  and :class:`ProblemSerializer` describe the endpoints' answers, for the
  OpenAPI schema.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.http import QueryDict
from rest_framework import serializers

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError, StoreUnavailableError, UnsavedInstanceError
from django_xsm.fields import AvailableEvent, BoundStatechart, column_value
from django_xsm.persistence.arguments import validate_key

__all__ = [
    "AvailableEventSerializer",
    "ProblemSerializer",
    "StatechartEventResultSerializer",
    "StatechartEventSerializer",
    "StatechartHistorySerializer",
    "StatechartSerializerField",
    "TransitionRecordSerializer",
    "describe_events",
]

logger = logging.getLogger("django_xsm.drf")

#: Form fields the browsable API adds to a form post; never event payload.
_FORM_ONLY = frozenset({"csrfmiddlewaretoken"})


def describe_events(events: Iterable[AvailableEvent]) -> list[dict[str, Any]]:
    """``[{"type": "PAY", "conditional": true}, ...]``: what a client needs
    to offer an event (``conditional``: a guard decides, send a payload)."""
    return [{"type": str(event), "conditional": bool(event.conditional)} for event in events]


class StatechartSerializerField(serializers.Field):  # type: ignore[type-arg]
    """A read-only view of a ``StatechartField`` (``source``: its name).

    ``StatechartSerializerField()`` gives the state column (``"paid"``,
    ``"shipping.packed"``) and costs no Redis I/O. ``full_value=True``
    gives the XState value instead (``{"shipping": "packed"}``), and
    ``with_events=True`` gives ``{"state": ..., "events": [{"type": "SHIP",
    "conditional": false}, ...]}``: the events the state accepts that
    ``context["request"].user`` may send (``PERMISSIONS``; without a
    request, only those that need no permission). Both load the instance,
    one Redis round trip per row.

    A row whose instance key cannot be used, or a Redis outage, is shown
    from the row's column instead of failing the whole response (events
    ``[]`` for the first, ``null`` for the second): docs/drf.md.
    """

    def __init__(self, *, with_events: bool = False, full_value: bool = False, **kwargs: Any):
        kwargs["read_only"] = True
        super().__init__(**kwargs)
        self.with_events = with_events
        self.full_value = full_value

    def _user(self) -> Any:
        request = self.context.get("request")
        user = getattr(request, "user", None)
        return user if user is not None else AnonymousUser()

    def to_representation(self, value: Any) -> Any:
        if not isinstance(value, BoundStatechart):
            raise TypeError(
                f"StatechartSerializerField {self.field_name!r} needs a StatechartField as its "
                f"source; {self.source!r} is a {type(value).__name__}"
            )
        if not (self.full_value or self.with_events):
            return value.column  # no I/O, and no key needed
        if not _usable_key(value):
            state = self._column_value(value) if self.full_value else value.column
            return {"state": state, "events": []} if self.with_events else state
        events: list[dict[str, Any]] | None = None
        try:
            if self.with_events:
                events = describe_events(value.events(user=self._user()))
            state = value.value if self.full_value else value.column
        except StoreUnavailableError:
            events = None  # unknown until Redis answers again
            state = self._column_value(value) if self.full_value else value.column
        if not self.with_events:
            return state
        return {"state": state, "events": events}

    @staticmethod
    def _column_value(value: BoundStatechart) -> Any:
        found = column_value(value.entry.machine.root, value.column)
        return value.column if found is None else found


def _usable_key(bound: BoundStatechart) -> bool:
    """Whether the row has a usable instance key; a WARNING names it when not."""
    try:
        validate_key(bound.key)
    except (InvalidConfigError, UnsavedInstanceError) as exc:
        row = bound.row
        logger.warning(
            "%s %s has no usable statechart key for %s (%s); shown from its column, without events",
            row._meta.label,
            brief(row.pk),
            bound.field.name,
            exc.message,
        )
        return False
    return True


class _EventTypeField(serializers.CharField):
    """A ``CharField`` that takes only a string: ``{"type": 7}`` is a field
    error, not the event type ``"7"``."""

    default_error_messages = {"not_a_string": "The event type must be a string, not {kind}."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string", kind=type(data).__name__)
        return str(super().to_internal_value(data))


class StatechartEventSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """``{"type": "PAY", "amount": 10}``: the event type and its payload.

    Every member besides ``type`` is payload and sent with the event as
    one mapping (``{"type": ..., **payload}``), so no body member can
    become a send option such as the actor. A form post (the browsable
    API) carries one value per field; its CSRF token is not payload.
    """

    type = _EventTypeField(
        max_length=255, help_text="The event type, e.g. PAY; every other member is payload."
    )

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        validated: dict[str, Any] = super().to_internal_value(data)
        # super() refused anything but a mapping; a QueryDict yields the last
        # value of each field, as a form field has one.
        assert isinstance(data, Mapping)
        payload = {
            str(name): value
            for name, value in data.items()
            if name != "type" and not (isinstance(data, QueryDict) and name in _FORM_ONLY)
        }
        return {**payload, "type": validated["type"]}


class AvailableEventSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """An event the current state accepts."""

    type = serializers.CharField()
    conditional = serializers.BooleanField(
        help_text="A guard decides: the event is accepted only with a payload that passes it."
    )


class StatechartEventResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """The answer to an event that was committed."""

    type = serializers.CharField(help_text="The event that was sent.")
    state = serializers.CharField(help_text="The state column after the event.")
    value = serializers.JSONField(help_text="The XState state value after the event.")
    changed = serializers.BooleanField(help_text="Whether the state or context changed.")
    events = AvailableEventSerializer(
        many=True, help_text="The events the new state accepts that this user may send."
    )


class TransitionRecordSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """One record of the transition log (``TransitionRecord.to_dict()``)."""

    key = serializers.CharField(help_text="The instance key.")
    seq = serializers.IntegerField(help_text="1, 2, 3... per instance, in commit order.")
    version = serializers.IntegerField(help_text="The snapshot version the commit produced.")
    event_type = serializers.CharField()
    payload = serializers.DictField(help_text="The event's payload, redacted as stored.")
    actor = serializers.CharField()
    reason = serializers.CharField()
    from_state = serializers.JSONField(help_text="The XState state value before.")
    to_state = serializers.JSONField(help_text="The XState state value after.")
    idempotency_key = serializers.CharField()
    correlation_id = serializers.CharField()
    timestamp_ms = serializers.IntegerField(help_text="Commit time, ms since the epoch.")
    accepted = serializers.BooleanField(help_text="False: the state refused the event.")


class StatechartHistorySerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A page of the history endpoint: records newest first."""

    next = serializers.URLField(
        allow_null=True, help_text="The next (older) page; null on the last page."
    )
    results = TransitionRecordSerializer(many=True)


class ProblemSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """An RFC 9457 problem document (application/problem+json); which
    extension members it has depends on its type."""

    type = serializers.CharField(
        help_text="This deployment's page for the problem (/_xsm/problems/<type>) or about:blank."
    )
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    retry_after = serializers.IntegerField(
        required=False, help_text="Seconds to wait before retrying (also the Retry-After header)."
    )
    event = serializers.CharField(required=False)
    state = serializers.JSONField(required=False)
    reason = serializers.CharField(required=False)
    guards = serializers.ListField(child=serializers.CharField(), required=False)
    key = serializers.CharField(required=False)
    idempotency_key = serializers.CharField(required=False)
    expected_version = serializers.IntegerField(required=False)
    actual_version = serializers.IntegerField(required=False)
    replicas_required = serializers.IntegerField(required=False)
    replicas_acknowledged = serializers.IntegerField(required=False)
    max_bytes = serializers.IntegerField(
        required=False, help_text="payload-too-large: the most bytes the server accepts."
    )
    # DRF's metaclass moves declared fields off the class, so this member
    # does not shadow Serializer.errors at runtime; only the stubs see both.
    errors = serializers.JSONField(  # type: ignore[assignment]
        required=False, help_text="The body's validation errors, by member."
    )
