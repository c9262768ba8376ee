"""A block's ``send()`` refuses reserved and unknown event types before its
claim and before the engine, strict or not; ``send_reserved()`` is the one
way to send a reserved type (the timer scanner and the outbox worker use
it). Memory, fakeredis and live; ``apersisted()`` on fakeredis and live."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import (
    EventNotAcceptedError,
    InvalidEventError,
    ReservedEventError,
    UnknownEventError,
)
from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, apersisted, persisted
from django_xsm.persistence.timers import DueTimerScanner
from tests.persistence.conftest import block_clock
from tests.persistence.test_apersisted import AsyncBackends, ab  # noqa: F401 (fixture)
from tests.support import Backends

COMPENSATIONS: list[str] = []


def _refund(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    COMPENSATIONS.append(event["delivery_id"])
    ctx["refunded"] = True


CHART: dict[str, Any] = {
    "id": "pay",
    "initial": "paid",
    "context": {"refunded": False},
    "states": {
        "paid": {
            "on": {
                "SHIP": "shipped",
                "xsm.outbox.failed": {"target": "refunding", "actions": "refund"},
            },
            "after": {"1000": "late"},
        },
        "late": {"on": {"SHIP": "shipped"}},
        "shipped": {"on": {"RETURN": "paid"}},
        "refunding": {},
    },
}


@pytest.fixture(autouse=True)
def _no_compensations() -> None:
    COMPENSATIONS.clear()


def machine() -> Any:
    return create_machine(CHART, logic=MachineLogic(actions={"refund": _refund}))


def plugins(b: Any) -> list[Any]:
    return [IdempotencyPlugin(b.inbox), AuditPlugin(b.log)]


def failed(delivery_id: str = "d-1") -> dict[str, Any]:
    return {"event": {"type": "order.paid"}, "error": "boom", "attempts": 3,
            "delivery_id": delivery_id}  # fmt: skip


def start(b: Backends, key: str = "p:1") -> int:
    """A stored instance back in 'paid' (SHIP then RETURN); its version."""
    m = machine()
    with persisted(b.store, key, m, plugins=plugins(b)) as block:
        block.send("SHIP")
        block.send("RETURN")
    return int(b.store.load(key).version)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    ("event", "error"),
    [
        ("xsm.outbox.failed", ReservedEventError),
        ({"type": "xsm.outbox.failed", **failed()}, ReservedEventError),
        ("xstate.after.1000.pay.paid", ReservedEventError),
        ("SHIPP", UnknownEventError),
    ],
)
def test_send_refuses_before_the_claim_and_writes_nothing(
    b: Backends, strict: bool, event: Any, error: type[Exception]
) -> None:
    version = start(b)
    log_before = b.log.read("p:1")
    with persisted(b.store, "p:1", machine(), plugins=plugins(b), strict=strict) as block:
        with pytest.raises(error):
            block.send(event, idempotency_key="k-1")
        # the key was never claimed: the same key runs the next event
        assert block.send("SHIP", idempotency_key="k-1").accepted
    assert COMPENSATIONS == []
    assert b.store.load("p:1").version == version + 1
    assert [r.event_type for r in b.log.read("p:1")] == [
        *(r.event_type for r in log_before), "SHIP",
    ]  # fmt: skip


def test_a_refused_type_alone_writes_nothing_and_creates_nothing(b: Backends) -> None:
    with pytest.raises(ReservedEventError):
        with persisted(b.store, "p:new", machine(), plugins=plugins(b)) as block:
            block.send("xsm.outbox.failed", **failed())
    with pytest.raises(UnknownEventError):
        with persisted(b.store, "p:new", machine(), plugins=plugins(b)) as block:
            block.send("SHIPP")
    assert b.store.load("p:new") is None
    assert b.log.read("p:new") == []
    assert COMPENSATIONS == []


def test_the_unknown_error_names_the_key_and_the_closest_types(b: Backends) -> None:
    with persisted(b.store, "p:2", machine(), plugins=plugins(b)) as block:
        with pytest.raises(UnknownEventError) as caught:
            block.send("ship")
    exc = caught.value
    assert isinstance(exc, EventNotAcceptedError) and exc.reason == "unknown-event"
    assert (exc.key, exc.machine, exc.suggestions) == ("p:2", "pay", ("SHIP",))
    assert exc.message == (
        "Event 'ship' is unknown to machine 'pay': no state of its chart takes it; "
        "did you mean 'SHIP'?"
    )


def test_a_known_type_the_state_does_not_take_keeps_todays_rules(b: Backends) -> None:
    start(b)
    with persisted(b.store, "p:1", machine(), plugins=plugins(b)) as block:
        assert not block.send("RETURN").accepted  # ignored, not an error
        with pytest.raises(EventNotAcceptedError) as caught:
            block.send("RETURN", strict=True)
    assert caught.value.reason == "no-transition"


def test_send_reserved_sends_a_compensation_as_the_outbox_worker_does(b: Backends) -> None:
    start(b)
    with persisted(b.store, "p:1", machine(), plugins=plugins(b), actor="xsm:outbox") as block:
        receipt = block.send_reserved("xsm.outbox.failed", reason="test", **failed("d-9"))
        assert receipt.accepted and block.matches("refunding")
    assert COMPENSATIONS == ["d-9"]
    last = b.log.read("p:1")[-1]
    assert (last.event_type, last.actor, last.reason) == ("xsm.outbox.failed", "xsm:outbox", "test")
    assert last.payload["delivery_id"] == "d-9"


def test_send_reserved_only_sends_reserved_types(b: Backends) -> None:
    start(b)
    with persisted(b.store, "p:1", machine(), plugins=plugins(b)) as block:
        with pytest.raises(InvalidEventError) as caught:
            block.send_reserved("SHIP")
    assert "send_reserved() sends only the reserved xstate.* and xsm.* events" in str(caught.value)
    assert caught.value.hint == "send the chart's own events with send()"
    assert b.store.load("p:1").snapshot["value"] == "paid"


def test_send_reserved_of_a_type_the_chart_lacks_is_ignored_like_any_event(b: Backends) -> None:
    """Reserved types are never 'unknown': a compensation to a chart without
    a transition for it is ignored (the outbox reports it as refused)."""
    start(b)
    with persisted(b.store, "p:1", machine(), plugins=plugins(b)) as block:
        assert not block.send_reserved("xsm.other", x=1).accepted


def test_the_timer_scanner_still_fires_xstate_after(b: Backends) -> None:
    clock = block_clock(b)
    start(b)
    clock.advance(1500)
    scanner = DueTimerScanner(b.store, {"pay": machine()}, plugins=plugins(b), now=clock)
    result = scanner.scan()
    assert result.fired == 1
    assert b.store.load("p:1").snapshot["value"] == "late"
    assert b.log.read("p:1")[-1].event_type == "xstate.after.1000.pay.paid"


async def test_asend_refuses_and_asend_reserved_sends(ab: AsyncBackends) -> None:  # noqa: F811
    m = machine()
    async with apersisted(ab.store, "p:a", m, plugins=ab.plugins()) as block:
        with pytest.raises(ReservedEventError):
            await block.asend("xsm.outbox.failed", idempotency_key="k", **failed())
        with pytest.raises(UnknownEventError) as caught:
            await block.asend("SHIPP", idempotency_key="k")
        with pytest.raises(ReservedEventError):
            block.send("xsm.outbox.failed")  # the plain send inside apersisted too
        assert caught.value.suggestions == ("SHIP",)
        assert COMPENSATIONS == []
        receipt = await block.asend_reserved("xsm.outbox.failed", **failed("d-a"))
        assert receipt.accepted
    assert COMPENSATIONS == ["d-a"]
    record = await ab.store.load("p:a")
    assert record.snapshot["value"] == "refunding"
    assert [r.event_type for r in await ab.log.read("p:a")] == ["xsm.outbox.failed"]
