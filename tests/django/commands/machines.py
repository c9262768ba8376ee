"""Timer machines of the command tests: ``alarm`` counts its fires, ``faulty``
fails every fire."""

from __future__ import annotations

from typing import Any

from django_xsm.engine import MachineLogic, create_machine

ALARM: dict[str, Any] = {
    "id": "alarm",
    "initial": "waiting",
    "context": {"rings": 0, "owner": "ann", "api_token": "s3cr3t"},
    "states": {
        "waiting": {
            "after": {"1000": {"target": "rung", "actions": "ring"}},
            "on": {"SNOOZE": {"target": "waiting", "reenter": True}},
        },
        "rung": {"on": {"RESET": "waiting"}},
    },
}

FAULTY: dict[str, Any] = {
    "id": "faulty",
    "initial": "waiting",
    "states": {
        "waiting": {
            "after": {"1000": {"target": "done", "actions": "explode"}},
            "on": {"POKE": {"target": "waiting", "reenter": True}},
        },
        "done": {},
    },
}


def ring(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["rings"] += 1


def explode(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    raise RuntimeError("the bell is broken")


alarm = create_machine(ALARM, logic=MachineLogic(actions={"ring": ring}))
faulty = create_machine(FAULTY, logic=MachineLogic(actions={"explode": explode}))

MACHINES = {
    "ticket": "tests.django.machines.ticket",
    "order": "testproject.orders.machines.order",
    "alarm": "tests.django.commands.machines.alarm",
    "faulty": "tests.django.commands.machines.faulty",
}
