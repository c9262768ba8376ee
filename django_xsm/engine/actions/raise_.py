"""``xstate.raise``: queue an internal event.

``{"type": "xstate.raise", "event": "E" | {"type": "E", ...payload}}``. The
event is processed in the same macrostep, after the eventless transitions
the current microstep enables, in FIFO order with the done events.
"""

from __future__ import annotations

from django_xsm.engine.chart.model import Action
from django_xsm.engine.events import Event

from .base import BuiltinAction, Effects, compile_event_action, parse_event_action

__all__ = ["ACTION", "RAISE"]

RAISE = "xstate.raise"


def execute(action: Action, effects: Effects) -> None:
    data = dict(action.builtin_event or {})
    effects.raise_event(Event(data.pop("type"), data))


ACTION = BuiltinAction(RAISE, parse_event_action, compile_event_action, execute)
