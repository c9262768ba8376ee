"""The built-in actions, one module each (as XState's ``actions/*.ts``).

* ``raise_``: ``xstate.raise``; ``emit``: ``xstate.emit``;
* ``base``: what a built-in action module provides (:class:`BuiltinAction`),
  the :class:`Effects` the run hands it, the event form raise and emit share.

:data:`BUILTIN_ACTIONS` is the one registration: the chart parses and
compiles, and the run executes, a built-in action through it. The chart
imports this package, so nothing here imports :mod:`django_xsm.engine.run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import emit, raise_
from .base import BuiltinAction, Effects

__all__ = ["BUILTIN_ACTIONS", "BuiltinAction", "Effects", "builtin_action"]

BUILTIN_ACTIONS: Mapping[str, BuiltinAction] = {a.type: a for a in (raise_.ACTION, emit.ACTION)}


def builtin_action(value: Any) -> BuiltinAction | None:
    """The built-in action a config value names (its string form, or a
    mapping's ``"type"``), else ``None``."""
    name = value.get("type") if isinstance(value, Mapping) else value
    return BUILTIN_ACTIONS.get(name) if isinstance(name, str) else None
