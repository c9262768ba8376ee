"""Which events a row's current state offers, and to whom.

An event is *offered* when an active state has a transition for it: listed
as accepted when ``can()`` says so with no payload, as *conditional* when
every transition for it has a guard that refuses (or cannot be evaluated)
without one. :func:`may_send` is the one rule of ``PERMISSIONS`` for the
admin, DRF, ``@stateful_view``, ``events(user=)`` and the live stream
(docs/models.md, "Permissions per event").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django_xsm.brief import brief_error
from django_xsm.registry import VIEW

if TYPE_CHECKING:
    from django_xsm.registry import MachineEntry, PermissionCheck

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


logger = logging.getLogger("django_xsm.permissions")


def _checked(
    entry: MachineEntry, check: PermissionCheck, user: Any, target: Any, event_type: str | None
) -> bool:
    if target is None:  # a check decides about a row or a key, never about nothing
        return False
    try:
        return bool(check(user, target, event_type))
    except Exception as exc:
        name = getattr(check, "__qualname__", type(check).__name__)
        logger.warning(
            "The PERMISSIONS check %s of machine %r raised %s for %s; refused",
            name,
            entry.name,
            brief_error(exc),
            event_type or VIEW,
        )
        return False


def may_send(
    entry: MachineEntry,
    event_type: str | None,
    user: Any,
    target: Any = None,
    *,
    per_object: bool = True,
) -> bool:
    """True when ``user`` (None: no check) may send ``event_type`` to
    ``target`` (the model row for a StatechartField, else the instance
    key; None: no target, so a check refuses). ``event_type`` None asks
    whether the user may follow the instance (the rules under ``VIEW``).
    ``per_object=False`` asks only the permission strings, leaving the
    checks to be asked about each target (what a list of many targets
    offers). See the module docstring."""
    if user is None:
        return True
    for rule in entry.permissions.get(VIEW if event_type is None else event_type, ()):
        if isinstance(rule, str):
            if not user.has_perm(rule):
                return False
        elif per_object and not _checked(entry, rule, user, target, event_type):
            return False
    return True


def _accepted(instance: Any, event_type: str) -> bool:
    try:
        return bool(instance.can(event_type))
    except Exception:  # a guard that needs a payload field raises without it
        return False


def available_events(
    entry: MachineEntry, instance: Any, *, user: Any = None, target: Any = None
) -> list[AvailableEvent]:
    """The events ``instance``'s state offers (see the module docstring);
    with ``user``, those :func:`may_send` grants for ``target``."""
    if instance.status != "active":
        return []
    machine = entry.machine
    nodes = [machine.get_state(state_id) for state_id in instance.state_ids]
    found: list[AvailableEvent] = []
    for event_type in machine.event_types:  # no reserved types, no wildcards
        if not may_send(entry, event_type, user, target):
            continue
        candidates = [t for node in nodes for t in node.candidates(event_type)]
        if not candidates:
            continue
        if _accepted(instance, event_type):
            found.append(AvailableEvent(event_type))
        elif all(t.guard is not None for t in candidates):
            found.append(AvailableEvent(event_type, conditional=True))
    return found
