"""``shortest_paths()``: the fewest steps to every reachable state, guards
as the caller says, timers as steps; and each path replayed on the real
stack with the ``xsm`` helper reaches its state."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError
from django_xsm.registry import machines
from django_xsm.testing import Path, Step, Xsm, shortest_paths
from testproject.orders.machines import order

TEA = {"sku": "tea", "qty": 2, "price_cents": 450}
PAYLOADS = {"ADD_ITEM": TEA, "PAYMENT_RECEIVED": {"payment_id": "p1", "amount_cents": 900}}
ALL_YES = {"hasItems": True, "paysTotal": True, "viaFlakyWarehouse": True, "shipmentFailed": True}


def route(path: Path) -> tuple[str, str]:
    return str(path.state), " > ".join(map(str, path.steps))


def test_every_reachable_state_with_its_shortest_path() -> None:
    paths = shortest_paths(order, guards=ALL_YES, events=PAYLOADS)
    assert [route(p) for p in paths] == [
        ("cart", ""),
        ("awaiting_payment", "CHECKOUT"),
        ("cancelled", "CANCEL"),
        ("paid", "CHECKOUT > PAYMENT_RECEIVED"),
        ("shipping", "CHECKOUT > PAYMENT_RECEIVED > SHIP"),
        ("shipped", "CHECKOUT > PAYMENT_RECEIVED > SHIP > WAREHOUSE_CONFIRMED"),
        ("shipping_failed", "CHECKOUT > PAYMENT_RECEIVED > SHIP > xsm.outbox.failed"),
    ]
    assert paths[1].state_ids == ("order", "order.awaiting_payment")
    assert paths[3].steps[1] == Step("PAYMENT_RECEIVED", PAYLOADS["PAYMENT_RECEIVED"])
    assert str(paths[3]) == "paid <- CHECKOUT > PAYMENT_RECEIVED"
    assert str(paths[0]) == "cart"


def test_guards_not_overridden_run_as_written() -> None:
    # viaFlakyWarehouse reads SHIP's payload (none here): always the main warehouse
    paths = shortest_paths(order, guards={"hasItems": True, "paysTotal": True}, events=PAYLOADS)
    found = {str(p.state) for p in paths}
    assert "shipped" in found and "shipping" not in found and "shipping_failed" not in found
    # hasItems reads the context: an empty cart never checks out
    no_items = shortest_paths(order, events=PAYLOADS)
    assert {str(p.state) for p in no_items} == {"cart", "cancelled"}


def test_a_timer_is_a_step_that_says_how_long_to_wait() -> None:
    paths = shortest_paths(machines["ticket"].machine, events={"BOOM": None})
    assert [route(p) for p in paths] == [("open", ""), ("stale", "after 60000ms")]
    (timer,) = paths[1].steps
    assert timer == Step("xstate.after.60000.ticket.open", {}, 60_000)
    assert paths[1].events == ("xstate.after.60000.ticket.open",)


def test_an_action_that_raises_names_the_state_and_the_event() -> None:
    with pytest.raises(InvalidConfigError, match="sending 'ADD_ITEM' in state 'cart' raised") as e:
        shortest_paths(order)
    assert "KeyError" in str(e.value) and "events={'ADD_ITEM': None}" in str(e.value)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidConfigError, match="guards names no guard of machine 'order'"):
        shortest_paths(order, guards={"hasitems": True})
    with pytest.raises(ArgumentTypeError, match=r"guards\['hasItems'\] must be True, False"):
        shortest_paths(order, guards={"hasItems": "yes"})
    with pytest.raises(ArgumentTypeError, match="machine must be a Machine"):
        shortest_paths("order")  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match=r"events\['ADD_ITEM'\] must be a dict \(the"):
        shortest_paths(order, events={"ADD_ITEM": ["tea"]})  # type: ignore[dict-item]


def test_the_machine_itself_is_left_as_it_was() -> None:
    shortest_paths(order, guards=ALL_YES, events=PAYLOADS)
    assert order.start().can("CHECKOUT") is False  # its own hasItems still reads the cart


@pytest.mark.parametrize("path", shortest_paths(order, guards=ALL_YES, events=PAYLOADS), ids=str)
def test_each_path_replayed_on_the_stack_reaches_its_state(
    project: Any, settings: Any, path: Path
) -> None:
    """What docs/testing.md suggests: one test per reachable state."""
    settings.ORDERS_PAYMENT_TIMEOUT_MS = 3_600_000
    project(
        MACHINES={
            "order": {
                "CONFIG": "testproject.orders.machines.CONFIG",
                "LOGIC": "tests.testing.test_paths.permissive_logic",
            }
        }
    )
    with Xsm() as helper:
        key = "order:1"
        objects = machines["order"].objects
        with objects.open(key) as block:
            block.save_created()
        for step in path.steps:
            if step.after_ms is not None:
                helper.advance(step.after_ms / 1000)
                continue
            with objects.open(key) as block:
                send = block.send_reserved if step.event.startswith("xsm.") else block.send
                send(step.event, **step.payload)
        assert objects.get(key).value == path.state


def permissive_logic() -> Any:
    """The order chart's logic with every guard saying yes (for the replay)."""
    from django_xsm.engine import MachineLogic

    logic = order.logic
    return MachineLogic(
        actions=logic.actions,
        guards={name: (lambda c, e: True) for name in ALL_YES},
        delays=logic.delays,
    )
