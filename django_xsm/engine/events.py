"""Event objects, event descriptors and the built-in event names.

An event is a type (a non-empty string) plus a payload dict. How
descriptors match and rank is docs/engine.md, "Wildcard ranking"; the
reserved namespaces (``xstate.*``, ``xsm.*``: only django-xsm sends them)
are its "Unknown and reserved event types", and :func:`reserved_namespace`
is the one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidEventError

__all__ = [
    "AFTER_PREFIX",
    "DONE_PREFIX",
    "INIT_EVENT_TYPE",
    "RESERVED_NAMESPACES",
    "WILDCARD",
    "Event",
    "after_event_type",
    "descriptor_matches",
    "done_event_type",
    "is_wildcard",
    "reserved_namespace",
    "to_event",
]

WILDCARD = "*"
INIT_EVENT_TYPE = "xstate.init"
AFTER_PREFIX = "xstate.after."
DONE_PREFIX = "xstate.done.state."
#: Event namespaces only django-xsm itself sends to (a whole first token:
#: ``"xsm"`` and ``"xsm.outbox.failed"`` are in ``xsm``, ``"xsmtp"`` is not).
RESERVED_NAMESPACES = ("xstate", "xsm")


def reserved_namespace(event_type: str) -> str:
    """The reserved namespace ``event_type`` is in (``"xstate"`` or
    ``"xsm"``), else ``""``."""
    for namespace in RESERVED_NAMESPACES:
        if event_type.startswith(namespace) and (
            len(event_type) == len(namespace) or event_type[len(namespace)] == "."
        ):
            return namespace
    return ""


def after_event_type(delay: str, state_id: str) -> str:
    """``xstate.after.<delay>.<state id>``, the delay as written in the config."""
    return f"{AFTER_PREFIX}{delay}.{state_id}"


def done_event_type(state_id: str) -> str:
    """``xstate.done.state.<state id>``."""
    return f"{DONE_PREFIX}{state_id}"


class Event:
    """An event: ``type`` plus a payload dict ``data``.

    Reads like a mapping over the payload (``event["k"]``, ``event.get("k")``,
    ``"k" in event``); ``to_dict()`` gives ``{"type": ..., **data}``. Events
    are values: two events are equal when type and data are equal.
    """

    __slots__ = ("data", "type")

    type: str
    data: dict[str, Any]

    def __init__(self, type: str, data: dict[str, Any] | None = None) -> None:
        self.type = type
        self.data = {} if data is None else data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def to_dict(self) -> dict[str, Any]:
        """``{"type": type, **data}`` (a new dict)."""
        out: dict[str, Any] = {"type": self.type}
        out.update(self.data)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self.type == other.type and self.data == other.data

    __hash__ = None  # type: ignore[assignment]  # mutable payload

    def __repr__(self) -> str:
        if self.data:
            return f"Event({self.type!r}, {self.data!r})"
        return f"Event({self.type!r})"


def to_event(event_or_type: object, payload: Mapping[str, Any] | None = None) -> Event:
    """Normalise ``send()``'s argument into an :class:`Event`.

    Accepts a non-empty string, a mapping with a non-empty string ``"type"``
    (its other keys become the payload) or an :class:`Event`; keyword payload
    is merged in (it wins over keys of the mapping). Anything else is
    :class:`InvalidEventError`.
    """
    if type(event_or_type) is str:
        if not event_or_type:
            raise InvalidEventError(
                "Event type must be a non-empty string, got ''",
                event=event_or_type,
                hint="send a name such as 'PAY'",
            )
        if payload and "type" in payload:
            raise _type_in_payload(event_or_type)
        return Event(event_or_type, dict(payload) if payload else {})
    if isinstance(event_or_type, Event):
        etype, data = event_or_type.type, dict(event_or_type.data)
    elif isinstance(event_or_type, Mapping):
        name = event_or_type.get("type")
        if type(name) is not str or not name:
            raise InvalidEventError(
                f"Event mapping needs a non-empty string 'type', got {brief(name)}",
                event=event_or_type,
                hint="use {'type': 'PAY', ...payload}",
            )
        etype, data = name, {k: v for k, v in event_or_type.items() if k != "type"}
    else:
        raise InvalidEventError(
            "An event must be a non-empty string or a mapping with a string "
            f"'type', got {type(event_or_type).__name__}",
            event=event_or_type,
            hint="send 'PAY' or {'type': 'PAY', ...}",
        )
    if payload:
        if "type" in payload:
            raise _type_in_payload(event_or_type)
        data.update(payload)
    return Event(etype, data)


def _type_in_payload(event: object) -> InvalidEventError:
    return InvalidEventError(
        "The payload may not contain a 'type' key",
        event=event,
        hint="the event type is the first argument; rename the payload field",
    )


def is_wildcard(descriptor: str) -> bool:
    """``"*"`` or a token-prefix descriptor such as ``"order.*"``."""
    return descriptor == WILDCARD or descriptor.endswith(".*")


def descriptor_matches(descriptor: str, event_type: str) -> bool:
    """Does a wildcard descriptor (``"*"`` or ``"a.b.*"``) match ``event_type``?

    Exact descriptors are looked up directly by the caller, never here.
    """
    if descriptor == WILDCARD:
        return True
    if not descriptor.endswith(".*"):
        return False
    prefix = descriptor[:-2]
    # token prefix: "a.*" matches "a" and "a.x...", never "ab"
    return event_type == prefix or event_type.startswith(prefix + ".")


def is_valid_descriptor(descriptor: str) -> bool:
    """Wildcards only as a whole token at the end (``*``, ``a.*``)."""
    if not descriptor:
        return False
    tokens = descriptor.split(".")
    if any(not t for t in tokens):
        return False
    for i, tok in enumerate(tokens):
        if "*" in tok and (tok != "*" or i != len(tokens) - 1):
            return False
    return True
