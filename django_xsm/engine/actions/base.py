"""What a built-in action module provides, and the parts raise and emit share.

A built-in action (``{"type": "xstate.<name>", ...}`` in a chart) is one
:class:`BuiltinAction`: how its config form is parsed and checked, its
compiled form, and what it does when a microstep runs it, through the
:class:`Effects` the run hands it. ``xstate.raise`` and ``xstate.emit``
both carry one event: :func:`parse_event_action` and
:func:`compile_event_action` are their config and compiled forms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from django_xsm.brief import brief
from django_xsm.engine.chart.model import Action
from django_xsm.engine.chart.problems import check_json_depth, path_join
from django_xsm.engine.chart.specs import ActionSpec, Problems
from django_xsm.engine.events import Event

__all__ = [
    "BuiltinAction",
    "Effects",
    "compile_event_action",
    "parse_event_action",
]


class Effects(Protocol):
    """What a built-in action may do while a microstep runs (given by the
    macrostep that runs it, :mod:`django_xsm.engine.run.macrostep`)."""

    def raise_event(self, event: Event) -> None:
        """Queue ``event`` for this macrostep (after its eventless transitions)."""

    def emit_event(self, event: dict[str, Any]) -> None:
        """Hand ``event`` to the outbox: it goes on the step's receipt."""


class BuiltinAction(NamedTuple):
    """One built-in action. ``parse`` checks its config form (the string
    form or the mapping whose ``"type"`` is ``type``), appending problems
    with their JSON paths and returning ``None`` on a bad one; ``compile``
    gives its compiled :class:`Action`; ``execute`` runs it."""

    type: str
    parse: Callable[[str | Mapping[str, Any], str, Problems], ActionSpec | None]
    compile: Callable[[ActionSpec], Action]
    execute: Callable[[Action, Effects], None]


def parse_event_action(
    value: str | Mapping[str, Any], path: str, problems: Problems
) -> ActionSpec | None:
    """``{"type": name, "event": "E" | {"type": "E", ...}}``: one event, a
    type or a dict (the string form alone names no event)."""
    if isinstance(value, str):
        problems.add(
            f"{brief(value)} needs an event",
            path,
            f'{{"type": "{value}", "event": {{"type": "E"}}}}',
        )
        return None
    name = value["type"]
    extra = [k for k in value if k not in ("type", "event")]
    event = value.get("event")
    epath = path_join(path, "event")
    if extra:
        problems.add(
            f"Unsupported key {brief(extra[0])} in {name}",
            path_join(path, extra[0]),
            "only 'event' is supported (no delays)",
        )
        return None
    if isinstance(event, str) and event:
        return ActionSpec(name, None, path, {"type": event})
    if isinstance(event, Mapping) and isinstance(event.get("type"), str) and event["type"]:
        if not check_json_depth(event, epath, problems):
            return None
        return ActionSpec(name, None, path, dict(event))
    problems.add(f'{name} needs an event: a type string or {{"type": ..., ...}}', epath)
    return None


def compile_event_action(spec: ActionSpec) -> Action:
    """The compiled form: the event, read-only, in ``builtin_event``."""
    return Action(
        spec.type, None, spec.path, builtin_event=MappingProxyType(dict(spec.builtin_event or {}))
    )
