"""Which events a state offers follows the engine's selection, wildcard
fallbacks included (XState 5.32.2+: a wildcard is tried when every guard
of the exact descriptor fails)."""

from __future__ import annotations

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.fields.events import available_events
from django_xsm.registry import MachineEntry

CHART = {
    "id": "fallback",
    "initial": "s",
    "states": {
        "s": {"on": {"E": {"target": "e", "guard": "no"}, "a.*": "a", "a.b": {"guard": "no"}}},
        "e": {},
        "a": {},
    },
}


def test_an_event_whose_exact_guard_refuses_is_offered_when_a_wildcard_catches_it() -> None:
    machine = create_machine(CHART, logic=MachineLogic(guards={"no": lambda c, e: False}))
    offered = available_events(MachineEntry("fallback", machine, "tests"), machine.start())
    assert "a.b" in offered
    assert [e.conditional for e in offered if e == "a.b"] == [False]
    # no wildcard catches E: its only transition is guarded, so it needs a payload
    assert [e.conditional for e in offered if e == "E"] == [True]
