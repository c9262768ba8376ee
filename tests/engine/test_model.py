"""The compiled chart as other layers see it (the admin draws it)."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import Machine, MachineLogic, StateNode, Transition, create_machine

CHART: dict[str, Any] = {
    "id": "order",
    "version": "2",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {
            "on": {"PAY": {"target": "paid", "guard": "ok"}, "item.*": {"actions": "log"}},
            "after": {"60000": "abandoned"},
        },
        "paid": {
            "initial": "new",
            "onDone": "archived",
            "states": {
                "hist": {"type": "history", "history": "deep"},
                "new": {"always": {"target": "done", "guard": "ok"}},
                "done": {"type": "final"},
            },
        },
        "abandoned": {},
        "archived": {"id": "archive", "type": "final"},
    },
}


@pytest.fixture
def machine() -> Machine:
    return create_machine(
        CHART, logic=MachineLogic(actions={"log": print}, guards={"ok": lambda c, e: True})
    )


def test_machine_attributes(machine: Machine) -> None:
    assert (machine.id, machine.version) == ("order", "2")
    assert isinstance(machine.root, StateNode) and machine.root.id == "order"
    assert [n.id for n in machine.root.children] == [
        "order.cart",
        "order.paid",
        "order.abandoned",
        "archive",
    ]
    assert machine.events == (
        "PAY",
        "item.*",
        "xstate.after.60000.order.cart",
        "xstate.done.state.order.paid",
    )
    assert len(machine.transitions) == 5


def test_state_nodes(machine: Machine) -> None:
    paid = machine.get_state("order.paid")
    assert (paid.key, paid.type, paid.initial, paid.parent) == (
        "paid",
        "compound",
        "new",
        machine.root,
    )
    assert [c.key for c in paid.children] == ["hist", "new", "done"]
    hist = machine.get_state("order.paid.hist")
    assert (hist.type, hist.history) == ("history", "deep")
    assert machine.get_state("paid") is paid
    assert machine.get_state("#archive").type == "final"
    with pytest.raises(KeyError, match="did you mean"):
        machine.get_state("order.payd")


def test_transitions_are_described_for_diagrams(machine: Machine) -> None:
    cart = machine.get_state("order.cart")
    described = [(t.kind, t.event, t.target_ids, t.guard_name) for t in cart.transitions]
    assert described == [
        ("on", "PAY", ("order.paid",), "ok"),
        ("on", "item.*", (), None),
        ("after", "xstate.after.60000.order.cart", ("order.abandoned",), None),
    ]
    assert cart.after == (("60000", "xstate.after.60000.order.cart"),)
    always = machine.get_state("order.paid.new").transitions[0]
    assert isinstance(always, Transition)
    assert always.to_dict() == {
        "source": "order.paid.new",
        "targets": ["order.paid.done"],
        "event": "",
        "kind": "always",
        "guard": "ok",
        "actions": [],
        "reenter": False,
    }
    assert machine.get_state("order.paid").transitions[0].kind == "onDone"


def test_everything_is_read_only(machine: Machine) -> None:
    with pytest.raises(AttributeError):
        machine.version = "3"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        machine.root.key = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        machine.transitions[0].event = "X"  # type: ignore[misc]
    with pytest.raises(TypeError):
        machine.config["states"]["cart"]["on"] = {}  # type: ignore[index]
    assert machine.config["version"] == "2"
    assert isinstance(machine.config["states"]["cart"]["after"]["60000"], str)


def test_config_copy_reflects_version_argument() -> None:
    m = create_machine(
        CHART,
        logic=MachineLogic(actions={"log": print}, guards={"ok": bool}),
        version="9",
    )
    assert m.config["version"] == "9" and m.version == "9"


def test_compiling_does_not_touch_the_config() -> None:
    import copy

    original = copy.deepcopy(CHART)
    create_machine(CHART, logic=MachineLogic(actions={"log": print}, guards={"ok": bool}))
    assert original == CHART
