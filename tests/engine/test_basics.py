"""Instances: start, send, receipts, value, state_ids, matches, strict, events."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from django_xsm.engine import Event, MachineLogic, Receipt, create_machine
from django_xsm.exceptions import EventNotAcceptedError, InvalidEventError

from .conftest import ORDER, ORDER_LOGIC


@pytest.fixture
def order() -> Any:
    return create_machine(ORDER, logic=ORDER_LOGIC).start()


def test_start_enters_initial_state_with_config_context(order: Any) -> None:
    assert order.value == "cart"
    assert order.state_ids == ("order", "order.cart")
    assert order.context == {"items": 0}
    assert order.status == "active"
    assert order.deadlines == ()


def test_start_copies_the_context_it_is_given() -> None:
    machine = create_machine(ORDER, logic=ORDER_LOGIC)
    given = {"items": 5, "tags": ["a"]}
    instance = machine.start(given)
    instance.send("ADD")
    instance.context["tags"].append("b")
    assert given == {"items": 5, "tags": ["a"]}
    assert machine.start().context == {"items": 0}  # config context untouched


def test_send_runs_actions_and_reports_change(order: Any) -> None:
    receipt = order.send("ADD")
    assert isinstance(receipt, Receipt)
    assert (receipt.event_type, receipt.accepted, receipt.changed) == ("ADD", True, True)
    assert receipt.value == "cart" and receipt.status == "active"
    assert [(t.source_id, t.target_ids, t.event) for t in receipt.transitions] == [
        ("order.cart", (), "ADD")
    ]
    assert order.context == {"items": 1}


def test_payload_reaches_actions_as_event_data(order: Any) -> None:
    order.send("ADD", qty=3)
    order.send({"type": "ADD", "qty": 2})
    order.send(Event("ADD", {"qty": 4}))
    assert order.context["items"] == 9


def test_accepted_transition_that_changes_nothing(order: Any) -> None:
    receipt = order.send("NOOP")
    assert receipt.accepted is True
    assert receipt.changed is False


def test_unknown_event_is_ignored(order: Any) -> None:
    before = order.snapshot()
    receipt = order.send("SHIP")
    assert (receipt.accepted, receipt.changed, receipt.transitions) == (False, False, ())
    assert order.snapshot() == before


def test_strict_send_raises_and_changes_nothing(order: Any) -> None:
    before = order.snapshot()
    with pytest.raises(EventNotAcceptedError) as info:
        order.send("SHIP", strict=True)
    assert info.value.event_type == "SHIP"
    assert info.value.value == "cart"
    assert "'SHIP' was not accepted" in str(info.value)
    assert order.snapshot() == before
    assert order.send("PAY", strict=True).accepted


def test_transition_to_sibling_and_final_state(order: Any) -> None:
    assert order.send("PAY").value == "paid"
    receipt = order.send("SHIP")
    assert receipt.status == "done" and order.status == "done"
    assert order.value == "shipped"


def test_events_after_done_are_ignored(order: Any) -> None:
    order.send("PAY")
    order.send("SHIP")
    receipt = order.send("ADD")
    assert (receipt.accepted, receipt.changed, receipt.status) == (False, False, "done")
    with pytest.raises(EventNotAcceptedError):
        order.send("ADD", strict=True)
    assert not order.can("ADD")


def test_matches_with_and_without_machine_id(order: Any) -> None:
    order.send("PAY")
    assert order.matches("paid")
    assert order.matches("order.paid")
    assert order.matches("#order.paid")
    assert order.matches("order")
    assert not order.matches("cart")
    assert not order.matches("order.cart")
    assert not order.matches("no-such-state")


def test_can_evaluates_without_side_effects(order: Any) -> None:
    assert order.can("ADD") and order.can("PAY") and order.can({"type": "NOOP"})
    assert not order.can("SHIP")
    assert order.context == {"items": 0}
    assert order.value == "cart"


@pytest.mark.parametrize(
    "bad", [None, "", 5, b"ADD", ["ADD"], {"type": 3}, {"type": ""}, {"qty": 1}]
)
def test_invalid_events_raise_invalid_event_error(order: Any, bad: object) -> None:
    with pytest.raises(InvalidEventError) as info:
        order.send(bad)
    assert isinstance(info.value, TypeError)
    assert "type" in str(info.value)


def test_payload_may_not_contain_type(order: Any) -> None:
    with pytest.raises(InvalidEventError, match="'type'"):
        order.send("ADD", type="X")


def test_event_object_reads_like_a_mapping() -> None:
    event = Event("ADD", {"qty": 2})
    assert event["qty"] == 2 and event.get("qty") == 2 and event.get("x", 7) == 7
    assert "qty" in event and "x" not in event
    assert event.to_dict() == {"type": "ADD", "qty": 2}
    assert event == Event("ADD", {"qty": 2}) and event != Event("ADD")
    assert Event("X").data == {}
    with pytest.raises(KeyError):
        event["missing"]


def test_action_receives_instance_context_event_and_action() -> None:
    seen: list[Any] = []

    def spy(instance: Any, context: Any, event: Any, action: Any) -> None:
        seen.append((instance, context, event.type, action.type, dict(action.params)))

    machine = create_machine(
        {
            "id": "m",
            "initial": "a",
            "states": {"a": {"on": {"GO": {"actions": {"type": "spy", "params": {"x": 1}}}}}},
        },
        logic=MachineLogic(actions={"spy": spy}),
    )
    instance = machine.start()
    instance.send("GO")
    assert seen == [(instance, instance.context, "GO", "spy", {"x": 1})]


def test_failing_action_rolls_the_instance_back() -> None:
    def boom(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
        context["items"] += 100
        context["nested"]["x"] = 2
        raise RuntimeError("boom")

    machine = create_machine(
        {
            "id": "m",
            "initial": "a",
            "context": {"items": 0, "nested": {"x": 1}},
            "states": {
                "a": {
                    "on": {
                        "IN_PLACE": {"actions": "boom"},
                        "MOVE": {"target": "b", "actions": "boom"},
                    }
                },
                "b": {},
            },
        },
        logic=MachineLogic(actions={"boom": boom}),
    )
    instance = machine.start()
    live = instance.context
    for event in ("IN_PLACE", "MOVE"):
        before = copy.deepcopy(instance.snapshot())
        with pytest.raises(RuntimeError):
            instance.send(event)
        assert instance.snapshot() == before
        assert instance.context is live  # restored in place
        assert live == {"items": 0, "nested": {"x": 1}}


def test_changed_detects_nested_context_mutation() -> None:
    def push(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
        context["items"].append(event["item"])

    def read(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
        _ = len(context["items"])

    machine = create_machine(
        {
            "id": "m",
            "initial": "a",
            "context": {"items": []},
            "states": {"a": {"on": {"PUSH": {"actions": "push"}, "READ": {"actions": "read"}}}},
        },
        logic=MachineLogic(actions={"push": push, "read": read}),
    )
    instance = machine.start()
    assert instance.send("PUSH", item=1).changed is True
    assert instance.send("READ").changed is False
    assert instance.context == {"items": [1]}


def test_receipt_is_immutable_and_value_is_a_copy(order: Any) -> None:
    receipt = order.send("ADD")
    with pytest.raises(AttributeError):
        receipt.changed = False  # type: ignore[misc]
    machine = create_machine(
        {"id": "p", "type": "parallel", "states": {"a": {}, "b": {}}},
    )
    instance = machine.start()
    value = instance.value
    value["a"] = "mutated"
    assert instance.value == {"a": {}, "b": {}}
    assert "Receipt(event_type='ADD'" in repr(receipt)


def test_cached_refusals_and_plans_still_honour_strict_and_guards() -> None:
    machine = create_machine(
        {
            "id": "g",
            "initial": "a",
            "context": {"open": False},
            "states": {"a": {"on": {"GO": {"target": "b", "guard": "is_open"}}}, "b": {}},
        },
        logic=MachineLogic(guards={"is_open": lambda c, e: c["open"]}),
    )
    inst = machine.start()
    for _ in range(3):
        assert inst.send("NOPE").accepted is False
        assert inst.send("GO").accepted is False
    with pytest.raises(EventNotAcceptedError):
        inst.send("NOPE", strict=True)
    with pytest.raises(EventNotAcceptedError):
        inst.send("GO", strict=True)
    inst.context["open"] = True  # guards read the live context every time
    assert inst.send("GO", strict=True).value == "b"


def test_sending_to_the_own_instance_from_an_action_is_refused() -> None:
    from django_xsm.exceptions import ReentrantSendError

    def resend(instance: Any, context: Any, event: Any, action: Any) -> None:
        instance.send("OTHER")

    for config in (
        {"id": "r", "initial": "a", "states": {"a": {"on": {"GO": {"actions": "resend"}}}}},
        {"id": "r", "initial": "a", "states": {"a": {"on": {"GO": "b"}}, "b": {"entry": "resend"}}},
    ):
        inst = create_machine(config, logic=MachineLogic(actions={"resend": resend})).start()
        before = inst.snapshot()
        with pytest.raises(ReentrantSendError) as info:
            inst.send("GO")
        assert info.value.event_type == "OTHER" and "xstate.raise" in str(info.value)
        assert inst.snapshot() == before
        assert inst.send("NOTHING").accepted is False  # usable afterwards
    entry_sender = {"id": "s", "initial": "a", "states": {"a": {"entry": "resend"}}}
    with pytest.raises(ReentrantSendError):
        create_machine(entry_sender, logic=MachineLogic(actions={"resend": resend})).start()


def test_a_strict_refusal_says_why_and_refusal_asks_without_sending() -> None:
    from django_xsm.engine import MachineLogic, create_machine

    chart = {
        "id": "o",
        "initial": "cart",
        "states": {
            "cart": {"on": {"PAY": {"target": "paid", "guard": "paysEnough"}, "ADD": {}}},
            "paid": {"type": "final"},
        },
    }
    logic = MachineLogic(guards={"paysEnough": lambda ctx, event: event.get("amount", 0) >= 10})
    order = create_machine(chart, logic=logic).start()
    assert order.refusal("SHIP") == ("no-transition", ())
    assert order.refusal("PAY") == ("guard-refused", ("paysEnough",))
    assert order.refusal("ADD") == ("", ())  # an unguarded transition: not refused
    with pytest.raises(EventNotAcceptedError) as err:
        order.send("PAY", amount=1, strict=True)
    assert (err.value.reason, err.value.guards) == ("guard-refused", ("paysEnough",))
    assert "guard 'paysEnough' said no" in str(err.value)
    order.send("PAY", amount=10)
    assert order.refusal("PAY") == ("done", ())
    with pytest.raises(EventNotAcceptedError) as err:
        order.send("PAY", strict=True)
    assert err.value.reason == "done" and "has finished" in str(err.value)
