"""The event types charts emit that no handler pattern takes (``xsm.E013``):
the ``xstate.emit`` actions of every registered chart name their types
statically. Events emitted from Python actions (``instance.emit()``) are
not visible here; the worker dead-letters those.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django_xsm.engine import Action, Machine
from django_xsm.registry import machines

from .patterns import most_specific

__all__ = ["EMIT", "Unhandled", "emitted_types", "unhandled_emits"]

#: The builtin action type that hands an event to the outbox.
EMIT = "xstate.emit"


@dataclass(frozen=True, slots=True)
class Unhandled:
    """``machine`` (registered name) emits ``event_type`` at ``paths``
    (the actions' JSON paths in the chart) and no pattern takes it."""

    machine: str
    event_type: str
    paths: tuple[str, ...]


def _actions(machine: Machine) -> Iterator[Action]:
    for node in machine.nodes:
        yield from node.entry
        yield from node.exit
        yield from node.initial_actions
        for transition in node.transitions:
            yield from transition.actions


def emitted_types(machine: Machine) -> dict[str, list[str]]:
    """Event type -> the JSON paths of the chart's actions that emit it."""
    found: dict[str, list[str]] = {}
    for action in _actions(machine):
        if action.type != EMIT or action.builtin_event is None:
            continue
        event_type = action.builtin_event.get("type")
        if isinstance(event_type, str) and event_type:
            found.setdefault(event_type, []).append(action.path)
    return found


def unhandled_emits(patterns: Iterable[str]) -> list[Unhandled]:
    """Every (machine, event type) of the registered machines that no
    pattern takes; a machine registered under two names is looked at once."""
    wanted = list(patterns)
    seen: set[str] = set()
    out: list[Unhandled] = []
    for name, entry in machines.items():
        if entry.machine.id in seen:
            continue
        seen.add(entry.machine.id)
        for event_type, paths in sorted(emitted_types(entry.machine).items()):
            if most_specific(wanted, event_type) is None:
                out.append(Unhandled(name, event_type, tuple(paths)))
    return out
