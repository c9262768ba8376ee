"""What the outbox holds: events a commit emitted, for workers to deliver.

An action emits an event (``xstate.emit`` in the chart, ``instance.emit()``
in Python); the block that ran it puts the event into its commit as an
:class:`Emitted`, and the store writes it in the same atomic step as the
snapshot, so an effect is recorded if and only if the transition that
caused it committed. Workers read it back as an :class:`OutboxEntry` and
hand each to a handler with a :class:`Delivery` (docs/outbox.md).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Delivery", "Emitted", "OutboxEntry", "delivery_id_for"]


def delivery_id_for(commit_id: str, index: int) -> str:
    """The stable id of the ``index``-th event a commit emitted: a retried
    commit (same commit id) names the same deliveries, and a handler can
    pass it downstream as an idempotency key."""
    return f"{commit_id}-{index}"


@dataclass(frozen=True, slots=True)
class Emitted:
    """One emitted event in a commit: its ``delivery_id`` and the event
    (a JSON-ready dict with a ``type``)."""

    delivery_id: str
    event: Mapping[str, Any]

    @property
    def event_type(self) -> str:
        return str(self.event.get("type", ""))


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a handler learns about the entry it handles.

    ``delivery_id`` is stable across retries (use it as the idempotency key
    of the call the handler makes); ``key`` and ``machine`` name the
    instance that emitted the event and ``version`` the version its commit
    produced; ``attempt`` counts from 1.
    """

    delivery_id: str
    key: str
    machine: str
    version: int
    attempt: int


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An outbox entry as a store reads it back: the emitted event with
    where it came from, how often delivery failed (``attempts``) and why
    (``last_error``, redacted), and when it was emitted."""

    delivery_id: str
    key: str
    machine: str
    version: int
    event: Mapping[str, Any]
    attempts: int = 0
    emitted_ms: int = 0
    last_error: str = ""

    @property
    def event_type(self) -> str:
        return str(self.event.get("type", ""))

    @property
    def emitted_at(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(self.emitted_ms / 1000, tz=_dt.UTC)

    def delivery(self) -> Delivery:
        """The :class:`Delivery` of the next attempt."""
        return Delivery(self.delivery_id, self.key, self.machine, self.version, self.attempts + 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery_id": self.delivery_id,
            "key": self.key,
            "machine": self.machine,
            "version": self.version,
            "event": dict(self.event),
            "attempts": self.attempts,
            "emitted_ms": self.emitted_ms,
            "last_error": self.last_error,
        }
