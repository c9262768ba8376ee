"""``xstate.emit`` and ``instance.emit()``: the engine records, nobody delivers.

docs/engine.md ("Emitted events") and docs/outbox.md: the engine returns
emitted events on the receipt and in the pure ``transition()`` result; a
send that fails emits nothing; a send that only emitted still changed
something (its commit carries the outbox entry).
"""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import InvalidConfigError, InvalidEventError

CHART: dict[str, Any] = {
    "id": "order",
    "initial": "new",
    "context": {"paid": 0},
    "states": {
        "new": {
            "entry": {"type": "xstate.emit", "event": {"type": "order.created"}},
            "on": {
                "PAY": {"target": "paid", "actions": ["pay", "notify"]},
                "PING": {"actions": {"type": "xstate.emit", "event": "pong"}},
                "BOOM": {"actions": ["shout", "fail"]},
            },
        },
        "paid": {"type": "final"},
    },
}


def _pay(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["paid"] = event.data.get("amount", 0)
    instance.emit({"type": "order.paid", "amount": ctx["paid"]})


def _notify(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    instance.emit("order.notified")


def _shout(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    instance.emit({"type": "order.lost"})


def _fail(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    raise RuntimeError("warehouse down")


def machine() -> Any:
    logic = MachineLogic(actions={"pay": _pay, "notify": _notify, "shout": _shout, "fail": _fail})
    return create_machine(CHART, logic=logic)


def test_chart_and_python_emits_are_on_the_receipt_in_order():
    inst = machine().start()
    assert inst.last_emitted == ({"type": "order.created"},)
    receipt = inst.send("PAY", amount=10)
    assert receipt.emitted == ({"type": "order.paid", "amount": 10}, {"type": "order.notified"})
    assert inst.value == "paid"


def test_a_send_that_only_emits_is_a_change():
    inst = machine().start()
    for _ in range(2):  # the second send takes the cached fast path
        receipt = inst.send("PING")
        assert receipt.emitted == ({"type": "pong"},)
        assert receipt.changed and receipt.accepted
    assert inst.value == "new" and inst.context == {"paid": 0}


def test_a_refused_or_failing_send_emits_nothing():
    inst = machine().start()
    refused = inst.send("NOPE")
    assert refused.emitted == () and not refused.changed
    with pytest.raises(RuntimeError):
        inst.send("BOOM")
    assert inst.last_emitted == ()  # the shout before the failure is dropped
    assert inst.send("PING").emitted == ({"type": "pong"},)


def test_emitted_events_are_copies():
    payload = {"items": [1, 2]}

    def emit_payload(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        instance.emit({"type": "x", "data": payload})

    chart = {"id": "m", "initial": "a", "states": {"a": {"on": {"GO": {"actions": "e"}}}}}
    inst = create_machine(chart, logic=MachineLogic(actions={"e": emit_payload})).start()
    receipt = inst.send("GO")
    payload["items"].append(3)
    assert receipt.emitted == ({"type": "x", "data": {"items": [1, 2]}},)


def test_emit_outside_a_send_is_refused_with_a_hint():
    inst = machine().start()
    with pytest.raises(InvalidConfigError) as err:
        inst.emit({"type": "x"})
    assert "from an action" in str(err.value)


def test_emit_of_something_that_is_not_an_event_is_refused():
    def bad(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        instance.emit({"amount": 1})

    chart = {"id": "m", "initial": "a", "states": {"a": {"on": {"GO": {"actions": "bad"}}}}}
    inst = create_machine(chart, logic=MachineLogic(actions={"bad": bad})).start()
    with pytest.raises(InvalidEventError):
        inst.send("GO")


def test_the_pure_api_returns_the_charts_emits_and_runs_nothing():
    m = machine()
    start = m.initial_snapshot(now=1)
    assert start.emitted == ({"type": "order.created"},)
    ping = m.transition(start.snapshot, "PING", now=2)
    assert ping.emitted == ({"type": "pong"},) and ping.changed
    pay = m.transition(start.snapshot, {"type": "PAY", "amount": 5}, now=2)
    assert pay.emitted == ()  # the Python actions were collected, not run
    assert [a.type for a in pay.actions] == ["pay", "notify"]


@pytest.mark.parametrize(
    "action",
    [
        "xstate.emit",
        {"type": "xstate.emit"},
        {"type": "xstate.emit", "event": {"amount": 1}},
        {"type": "xstate.emit", "event": "E", "delay": 100},
    ],
)
def test_a_malformed_emit_action_is_a_config_error(action: Any):
    chart = {"id": "m", "initial": "a", "states": {"a": {"on": {"GO": {"actions": action}}}}}
    with pytest.raises(InvalidConfigError) as err:
        create_machine(chart)
    assert "xstate.emit" in str(err.value)
