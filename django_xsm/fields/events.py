"""Which events a row's current state offers, and to whom.

An event is *offered* when an active state has a transition for it. It is
listed as accepted when ``can()`` says so with no payload, and as
*conditional* when every transition for it has a guard that refuses (or
cannot be evaluated) without a payload: a form must ask for data first.
With a user, events guarded by a permission in the machine's
``PERMISSIONS`` are listed only when ``user.has_perm()`` grants it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django_xsm.registry import MachineEntry

__all__ = ["AvailableEvent", "available_events", "may_send"]


class AvailableEvent(str):
    """An event type (compares equal to its string) with ``conditional``:
    True when a guard decides and the event needs a payload to pass."""

    conditional: bool

    def __new__(cls, event_type: str, *, conditional: bool = False) -> AvailableEvent:
        made = super().__new__(cls, event_type)
        made.conditional = conditional
        return made

    def __repr__(self) -> str:
        return f"AvailableEvent({str(self)!r}, conditional={self.conditional})"


def may_send(entry: MachineEntry, event_type: str, user: Any) -> bool:
    """True when ``user`` (None: no check) may send ``event_type``."""
    if user is None:
        return True
    permission = entry.permissions.get(event_type)
    return permission is None or bool(user.has_perm(permission))


def _accepted(instance: Any, event_type: str) -> bool:
    try:
        return bool(instance.can(event_type))
    except Exception:  # a guard that needs a payload field raises without it
        return False


def available_events(
    entry: MachineEntry, instance: Any, *, user: Any = None
) -> list[AvailableEvent]:
    """The events ``instance``'s state offers (see the module docstring)."""
    if instance.status != "active":
        return []
    machine = entry.machine
    nodes = [machine.get_state(state_id) for state_id in instance.state_ids]
    found: list[AvailableEvent] = []
    for event_type in machine.event_types:  # no reserved types, no wildcards
        if not may_send(entry, event_type, user):
            continue
        candidates = [t for node in nodes for t in node.candidates(event_type)]
        if not candidates:
            continue
        if _accepted(instance, event_type):
            found.append(AvailableEvent(event_type))
        elif all(t.guard is not None for t in candidates):
            found.append(AvailableEvent(event_type, conditional=True))
    return found
