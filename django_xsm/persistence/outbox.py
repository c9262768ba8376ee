"""What the outbox holds: events a commit emitted, for workers to deliver.

An action emits an event (``xstate.emit`` in the chart, ``instance.emit()``
in Python); the block that ran it puts the event into its commit as an
:class:`Emitted`, and the store writes it in the same atomic step as the
snapshot, so an effect is recorded if and only if the transition that
caused it committed. Workers take it as an :class:`OutboxLease` of an
:class:`OutboxEntry` from the backend's :class:`OutboxReader` and hand each
to a handler with a :class:`Delivery` (docs/outbox.md); an entry out of
attempts becomes a :class:`DeadLetter`.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, Protocol, runtime_checkable

from .observers import Registry, notify

__all__ = [
    "DeadLetter",
    "Delivery",
    "Emitted",
    "FailOutcome",
    "OutboxEntry",
    "OutboxLease",
    "OutboxObserver",
    "OutboxReader",
    "add_process_observer",
    "delivery_id_for",
    "notify_ended",
    "notify_taken",
    "observers_of",
    "process_observers",
    "remove_process_observer",
]

logger = logging.getLogger("django_xsm.outbox")

#: What ``fail()`` did: the entry waits for a retry, became a dead letter,
#: or nothing changed because the lease was lost.
FailOutcome = Literal["retry", "dead", "lost"]


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
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return values | {"event": dict(self.event)}


@dataclass(frozen=True, slots=True)
class OutboxLease:
    """One entry handed to ``consumer``: its ``entry`` (``entry.delivery()``
    is what the handler gets) and where it sits (``stream_id`` in the
    stream of ``bucket``). ``deliveries`` is the stream's delivery count
    when it was taken: ``ack`` and ``fail`` only act while it is unchanged,
    so a lease reclaimed since — even by the same consumer name — is lost."""

    entry: OutboxEntry
    stream_id: str
    bucket: int
    consumer: str
    deliveries: int = 0


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An entry that ran out of attempts (or was damaged): ``entry`` with
    its attempts and ``last_error``, when it died (``dead_ms``, server
    clock) and where it sits in the dead-letter stream of ``bucket``."""

    entry: OutboxEntry
    dead_ms: int
    stream_id: str
    bucket: int

    @property
    def cursor(self) -> str:
        """The ``after=`` of the next ``dead_letters()`` page."""
        return f"{self.stream_id}/{self.bucket}"


@runtime_checkable
class OutboxReader(Protocol):
    """The delivery side of the outbox (commits write it; workers, the
    admin pages and ``xsm_outbox`` read it through ``get_outbox()``).

    * ``take`` leases at most ``count`` entries to ``consumer``, oldest
      first; a lease neither acked nor failed within
      ``visibility_timeout_ms`` goes to the next ``take`` (at least once).
    * ``ack`` / ``fail`` end a lease only while its consumer still holds
      it (False / ``"lost"`` otherwise); ``fail`` with ``retry_at_ms``
      schedules a retry, without it makes a dead letter.
    * ``dead_letters`` pages by ``DeadLetter.cursor``; ``redrive`` moves one
      back (attempts reset), ``redrive_all`` up to ``limit``;
      ``purge_dead`` removes (or with ``dry_run`` counts) old ones.
    * ``stats`` is ``pending``, ``retrying``, ``dead`` and ``lag_ms``.
    * ``observers`` see each lease taken and how it ended, besides the
      process's (``add_process_observer``); their errors are logged, never
      raised (:func:`notify_taken`, :func:`notify_ended`).
    """

    observers: tuple[OutboxObserver, ...]

    def take(
        self,
        consumer: str,
        *,
        count: int = 100,
        visibility_timeout_ms: int = 60_000,
        now_ms: int | None = None,
    ) -> list[OutboxLease]: ...

    def ack(self, lease: OutboxLease) -> bool: ...

    def ack_many(self, leases: Sequence[OutboxLease]) -> list[bool]: ...

    def fail(self, lease: OutboxLease, error: str, *, retry_at_ms: int | None) -> FailOutcome: ...

    def dead_letters(self, *, limit: int = 100, after: str = "") -> list[DeadLetter]: ...

    def waiting(self, *, limit: int = 100) -> list[tuple[OutboxEntry, int]]: ...

    def pending(self, *, limit: int = 100) -> list[tuple[OutboxEntry, str, int]]: ...

    def redrive(self, delivery_id: str) -> bool: ...

    def redrive_all(self, *, limit: int | None = None) -> int: ...

    def purge_dead(self, *, older_than_ms: int, dry_run: bool = False) -> int: ...

    def stats(self) -> dict[str, int]: ...


class OutboxObserver:
    """Base for observers of an outbox reader: synchronous, no I/O
    expected."""

    def taken(self, outbox: Any, leases: Sequence[OutboxLease]) -> None:
        """``take()`` leased ``leases`` (possibly none)."""

    def ended(self, outbox: Any, lease: OutboxLease, outcome: str) -> None:
        """A lease ended: ``"delivered"`` (``ack()`` / ``ack_many()``
        accepted), ``"lost"`` (reclaimed before its ack or fail),
        ``"retry"`` or ``"dead"`` (``fail()``)."""


_PROCESS: Registry[OutboxObserver] = Registry(OutboxObserver)

# What every outbox reader gets besides its own (see Registry); metrics add one.
add_process_observer = _PROCESS.add
remove_process_observer = _PROCESS.remove
process_observers = _PROCESS.registered
observers_of = _PROCESS.joined


def notify_taken(
    observers: tuple[OutboxObserver, ...], outbox: Any, leases: Sequence[OutboxLease]
) -> None:
    notify(observers, lambda o: o.taken(outbox, leases), logger, "outbox observer", "take()")


def notify_ended(
    observers: tuple[OutboxObserver, ...],
    outbox: Any,
    ended: Sequence[tuple[OutboxLease, str]],
) -> None:
    for lease, outcome in ended:
        notify(
            observers,
            lambda o: o.ended(outbox, lease, outcome),  # noqa: B023 (called at once)
            logger,
            "outbox observer",
            f"{lease.entry.delivery_id} {outcome}",
        )
