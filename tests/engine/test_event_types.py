"""The event types a chart can take, and the one rule every API that
persists runs before it sends: ``Machine.check_sendable`` (reserved
``xstate.*`` / ``xsm.*`` types, types no state of the chart takes).

The engine itself stays an XState interpreter: it ignores an unknown type."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import Event, create_machine
from django_xsm.engine.events import RESERVED_NAMESPACES, reserved_namespace
from django_xsm.exceptions import (
    EventNotAcceptedError,
    InvalidEventError,
    ReservedEventError,
    UnknownEventError,
    XsmError,
)

TICKET: dict[str, Any] = {
    "id": "ticket",
    "initial": "open",
    "states": {
        "open": {
            "on": {"ASSIGN": "assigned", "xsm.outbox.failed": "compensating"},
            "after": {"5000": "escalated"},
        },
        "assigned": {
            "initial": "working",
            "states": {"working": {"on": {"PAUSE": "paused"}}, "paused": {}},
            "on": {"UNASSIGN": "open", "order.*": "open"},
            "onDone": "open",
        },
        "escalated": {"on": {"ASSIGN": "assigned"}},
        "compensating": {},
    },
}


@pytest.fixture
def ticket() -> Any:
    return create_machine(TICKET)


def test_event_types_are_the_exact_descriptors_outside_the_reserved_namespaces(
    ticket: Any,
) -> None:
    # document order of the states (a parent before its children)
    assert ticket.event_types == ("ASSIGN", "UNASSIGN", "PAUSE")
    # events keeps every descriptor, reserved and wildcard ones included
    assert "xsm.outbox.failed" in ticket.events and "order.*" in ticket.events
    assert any(e.startswith("xstate.after.") for e in ticket.events)
    assert ticket.chart.wildcards == ("order.*",)


@pytest.mark.parametrize(
    ("event_type", "known"),
    [
        ("ASSIGN", True),  # a state's own
        ("PAUSE", True),  # a nested state's
        ("xsm.outbox.failed", True),  # reserved, but the chart has it
        ("order", True),  # "order.*" matches its own token
        ("order.cancelled", True),
        ("order.x.y", True),
        ("orders", False),  # a token prefix, not a string prefix
        ("ASSIGNN", False),
        ("assign", False),  # case matters
        ("", False),
    ],
)
def test_knows_reads_exact_and_wildcard_descriptors_anywhere(
    ticket: Any, event_type: str, known: bool
) -> None:
    assert ticket.knows(event_type) is known


def test_a_star_anywhere_knows_every_type() -> None:
    machine = create_machine(
        {
            "id": "m",
            "initial": "a",
            "states": {"a": {"on": {"GO": "b"}}, "b": {"on": {"*": "a"}}},
        }
    )
    for event_type in ("GO", "ANYTHING", "x.y.z", "ASSIGNN"):
        assert machine.knows(event_type)
        machine.check_sendable(event_type)  # no error
    assert machine.event_types == ("GO",)  # "*" is no type to send by name


def test_a_typo_is_unknown_and_the_message_suggests_the_closest_types(ticket: Any) -> None:
    with pytest.raises(UnknownEventError) as caught:
        ticket.check_sendable("ASSIGNN")
    exc = caught.value
    assert isinstance(exc, EventNotAcceptedError) and isinstance(exc, XsmError)
    assert (exc.event_type, exc.reason, exc.machine, exc.value, exc.guards) == (
        "ASSIGNN", "unknown-event", "ticket", None, (),
    )  # fmt: skip
    assert exc.suggestions == ("ASSIGN", "UNASSIGN")
    assert exc.message == (
        "Event 'ASSIGNN' is unknown to machine 'ticket': no state of its chart takes it; "
        "did you mean 'ASSIGN' or 'UNASSIGN'?"
    )
    assert str(exc).endswith("(fix the event type, or add a transition for it to the chart)")


def test_suggestions_ignore_case_and_never_name_reserved_types(ticket: Any) -> None:
    with pytest.raises(UnknownEventError) as caught:
        ticket.check_sendable("pause")
    assert caught.value.suggestions == ("PAUSE",)
    assert "did you mean 'PAUSE'?" in caught.value.message
    with pytest.raises(UnknownEventError) as caught:
        ticket.check_sendable("outbox.failed")
    assert not any(s.startswith("xsm.") for s in caught.value.suggestions)


def test_an_unknown_type_with_nothing_close_has_no_suggestion(ticket: Any) -> None:
    with pytest.raises(UnknownEventError) as caught:
        ticket.check_sendable("ZZZZZZZZ")
    assert caught.value.suggestions == ()
    assert caught.value.message == (
        "Event 'ZZZZZZZZ' is unknown to machine 'ticket': no state of its chart takes it"
    )


def test_three_suggestions_read_as_a_list() -> None:
    machine = create_machine(
        {
            "id": "m",
            "initial": "a",
            "states": {"a": {"on": {"PAY1": "a", "PAY2": "a", "PAY3": "a", "SHIP": "a"}}},
        }
    )
    with pytest.raises(UnknownEventError) as caught:
        machine.check_sendable("PAY")
    assert caught.value.suggestions == ("PAY1", "PAY2", "PAY3")
    assert caught.value.message.endswith("did you mean 'PAY1', 'PAY2' or 'PAY3'?")


@pytest.mark.parametrize(
    ("event_type", "namespace"),
    [
        ("xsm.outbox.failed", "xsm"),  # declared by the chart: still reserved
        ("xsm.anything", "xsm"),
        ("xsm", "xsm"),
        ("xstate.after.5000.ticket.open", "xstate"),
        ("xstate.init", "xstate"),
        ("xstate.done.state.ticket.assigned", "xstate"),
        ("xstate", "xstate"),
    ],
)
def test_reserved_types_are_refused_whatever_the_chart_declares(
    ticket: Any, event_type: str, namespace: str
) -> None:
    with pytest.raises(ReservedEventError) as caught:
        ticket.check_sendable(event_type)
    exc = caught.value
    assert isinstance(exc, ValueError) and isinstance(exc, XsmError)
    assert (exc.event_type, exc.namespace) == (event_type, namespace)
    assert exc.message.endswith(
        f"is reserved: {namespace}.* events are sent only by django-xsm itself "
        "(timers, the outbox worker)"
    )
    assert "send_reserved()" in exc.hint


@pytest.mark.parametrize("event_type", ["xsmtp", "xstatey", "XSM.x", "my.xsm.x", "x"])
def test_only_the_whole_first_token_is_reserved(event_type: str) -> None:
    assert reserved_namespace(event_type) == ""


def test_the_reserved_namespaces() -> None:
    assert RESERVED_NAMESPACES == ("xstate", "xsm")


def test_check_sendable_takes_what_send_takes(ticket: Any) -> None:
    ticket.check_sendable({"type": "ASSIGN", "who": "ann"})
    ticket.check_sendable(Event("ASSIGN"))
    with pytest.raises(UnknownEventError):
        ticket.check_sendable({"type": "ASIGN"})
    with pytest.raises(ReservedEventError):
        ticket.check_sendable(Event("xsm.outbox.failed"))
    with pytest.raises(InvalidEventError):
        ticket.check_sendable(42)


def test_the_engine_keeps_xstate_semantics_for_unknown_and_reserved_types(ticket: Any) -> None:
    """Instance.send() is XState: an unknown type is ignored (strict: refused
    as no-transition), a reserved one runs like any event. The persisted
    APIs refuse both (tests/persistence/test_event_types.py)."""
    instance = ticket.start()
    receipt = instance.send("ASSIGNN")
    assert (receipt.accepted, receipt.changed, instance.value) == (False, False, "open")
    with pytest.raises(EventNotAcceptedError) as caught:
        instance.send("ASSIGNN", strict=True)
    assert caught.value.reason == "no-transition"
    assert not instance.can("ASSIGNN")
    assert not ticket.transition(instance.snapshot(), "ASSIGNN", now=0).accepted
    assert instance.send("xsm.outbox.failed").accepted
    assert instance.value == "compensating"
