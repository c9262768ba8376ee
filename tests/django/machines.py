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
                # the outbox's compensation: only django-xsm may send it
                "xsm.outbox.failed": {"actions": "bump"},
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


def _renamed(states: dict[str, Any]) -> dict[str, Any]:
    """TICKET's states with "closed" renamed "resolved"."""
    renamed = {("resolved" if name == "closed" else name): dict(s) for name, s in states.items()}
    renamed["open"]["on"] = {
        **states["open"]["on"],
        "CLOSE": {"target": "resolved", "guard": "bumped"},
    }
    return renamed


#: TICKET with a state renamed and the same (default) version: what a deploy
#: that forgot the version bump runs (stored tickets cannot be loaded).
TICKET_RENAMED: dict[str, Any] = {**TICKET, "states": _renamed(TICKET["states"])}
ticket_renamed = create_machine(TICKET_RENAMED, logic=logic)


def ticket_to_v2(snapshot: dict[str, Any]) -> dict[str, Any]:
    value = "resolved" if snapshot["value"] == "closed" else snapshot["value"]
    return {**snapshot, "machine_version": "2", "value": value}


#: The same change done right: version 2 with a migration from "" (TICKET's).
ticket_v2 = create_machine(TICKET_RENAMED, logic=logic, version="2", migrations={"": ticket_to_v2})
#: Version 2 without the migration.
ticket_v2_unmigrated = create_machine(TICKET_RENAMED, logic=logic, version="2")


def _broken_migration(snapshot: dict[str, Any]) -> dict[str, Any]:
    raise KeyError("no_such_field")


ticket_v2_broken = create_machine(
    TICKET_RENAMED, logic=logic, version="2", migrations={"": _broken_migration}
)
