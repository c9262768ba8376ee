"""``xstate.emit``: hand an event to the outbox.

``{"type": "xstate.emit", "event": "E" | {"type": "order.paid", ...}}``. The
event goes on the step's receipt (``receipt.emitted``) and, inside
``persisted()``, into the outbox with the commit that records the step;
the engine never delivers it (docs/engine.md, "Emitted events").
"""

from __future__ import annotations

from django_xsm.engine.chart.model import Action

from .base import BuiltinAction, Effects, compile_event_action, parse_event_action

__all__ = ["ACTION", "EMIT"]

EMIT = "xstate.emit"


def execute(action: Action, effects: Effects) -> None:
    effects.emit_event(dict(action.builtin_event or {}))


ACTION = BuiltinAction(EMIT, parse_event_action, compile_event_action, execute)
