"""Charts of the testing toolkit's tests (registered next to the test
project's by ``tests/testing/conftest.py``).

``relay``: a -> b -> c, one second each (timers a fire arms);
``spin``: an ``after`` of 0 that re-enters its state (fires forever);
``fragile``: a timer whose action raises (retried, then dead-lettered).
The outbox tests use ``shipment`` and ``mute`` of tests/django/outbox.
"""

from __future__ import annotations

from typing import Any

from django_xsm.engine import MachineLogic, create_machine
from tests.django.outbox.machines import MACHINES as OUTBOX_MACHINES

RELAY: dict[str, Any] = {
    "id": "relay",
    "initial": "a",
    "states": {
        "a": {"after": {"1000": "b"}},
        "b": {"after": {"1000": "c"}},
        "c": {"on": {"BACK": "a"}},
    },
}

SPIN: dict[str, Any] = {
    "id": "spin",
    "initial": "round",
    "states": {"round": {"after": {"0": {"target": "round", "reenter": True}}}},
}

FRAGILE: dict[str, Any] = {
    "id": "fragile",
    "initial": "waiting",
    "states": {"waiting": {"after": {"1000": {"target": "done", "actions": "boom"}}}, "done": {}},
}


def _boom(*args: Any) -> None:
    raise RuntimeError("the timer's action failed")


relay = create_machine(RELAY)
spin = create_machine(SPIN)
fragile = create_machine(FRAGILE, logic=MachineLogic(actions={"boom": _boom}))

MACHINES = {
    "relay": "tests.testing.machines.relay",
    "spin": "tests.testing.machines.spin",
    "fragile": "tests.testing.machines.fragile",
    **OUTBOX_MACHINES,
}
