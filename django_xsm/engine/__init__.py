"""django-xsm engine: a pure interpreter for XState v5-style JSON statecharts.

Stdlib only, no I/O, no clock reads (time comes in as data)::

    from django_xsm.engine import create_machine, MachineLogic

    machine = create_machine(config, logic=MachineLogic(actions={...}))
    order = machine.start()
    order.send("ADD")
    snapshot = order.snapshot()           # JSON-ready dict
    order = machine.restore(snapshot)     # runs no actions
    result = machine.transition(snapshot, "PAY", now=now_ms)  # pure step

See ``docs/engine.md`` for the supported JSON, the semantics and the
snapshot format.
"""

from __future__ import annotations

from .chart.logic import MachineLogic
from .chart.model import Action, Guard, StateNode, Transition
from .events import Event, to_event
from .machine import Instance, Machine, create_machine
from .run.deadlines import Deadline
from .run.observe import StepObserver, observe_steps
from .run.results import ActionCall, Receipt, TransitionResult

__all__ = [
    "Action",
    "ActionCall",
    "Deadline",
    "Event",
    "Guard",
    "Instance",
    "Machine",
    "MachineLogic",
    "Receipt",
    "StateNode",
    "StepObserver",
    "Transition",
    "TransitionResult",
    "create_machine",
    "observe_steps",
    "to_event",
]
