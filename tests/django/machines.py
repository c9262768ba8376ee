"""Machines for the Django-layer tests."""

from __future__ import annotations

from typing import Any

from django_xsm.engine import MachineLogic, create_machine

TICKET: dict[str, Any] = {
    "id": "ticket",
    "initial": "open",
    "context": {"count": 0},
    "states": {
        "open": {
            "on": {
                "BUMP": {"actions": "bump"},
                "CLOSE": {"target": "closed", "guard": "bumped"},
                "BOOM": {"actions": "boom"},
            },
            "after": {"60000": {"target": "stale"}},
        },
        "closed": {"on": {"REOPEN": "open"}},
        "stale": {},
    },
}


def bump(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["count"] += 1


def boom(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    raise RuntimeError("boom")


def bumped(context: dict[str, Any], event: Any) -> bool:
    return bool(context["count"] > 0)


logic = MachineLogic(actions={"bump": bump, "boom": boom}, guards={"bumped": bumped})
ticket = create_machine(TICKET, logic=logic)


def ticket_factory() -> Any:
    return create_machine(TICKET, logic=logic)


def logic_factory() -> MachineLogic:
    return logic


NOT_A_MACHINE = 42
OTHER_WITH_SAME_ID = create_machine({**TICKET, "states": {"open": {}}}, logic=MachineLogic())

PLAIN_CONFIG: dict[str, Any] = {
    "id": "plain",
    "initial": "a",
    "states": {"a": {"on": {"GO": "b"}}, "b": {}},
}
FACTORY_CALLS: list[int] = [0]


def counting_factory() -> Any:
    FACTORY_CALLS[0] += 1
    return create_machine(TICKET, logic=logic)
