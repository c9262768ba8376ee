"""What an outbox reader tells its observers (metrics):
:class:`OutboxObserver`, the base of their hooks, and the observers every
reader of the process gets (:func:`add_process_observer`).

A reader decides at each ``take()`` / ``ack()`` / ``ack_many()`` /
``fail()`` which observers it has: its own (``observers=``) and the
process's of a class it has none of; with none it calls nothing. The hooks
run after the call returned (a call that raised is not seen); an
observer's error is logged, never raised, and changes nothing the call
returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from .outbox import OutboxLease

__all__ = [
    "OutboxObserver",
    "add_process_observer",
    "notify_ended",
    "notify_taken",
    "observers_of",
    "process_observers",
    "remove_process_observer",
]

logger = logging.getLogger("django_xsm.outbox")


class OutboxObserver:
    """Base for observers of an outbox reader: synchronous, no I/O
    expected."""

    def taken(self, outbox: Any, leases: Sequence[OutboxLease]) -> None:
        """``take()`` leased ``leases`` (possibly none)."""

    def ended(self, outbox: Any, lease: OutboxLease, outcome: str) -> None:
        """A lease ended: ``"delivered"`` (``ack()`` / ``ack_many()``
        accepted), ``"lost"`` (reclaimed before its ack or fail),
        ``"retry"`` or ``"dead"`` (``fail()``)."""


_process_lock = threading.Lock()
_process: tuple[OutboxObserver, ...] = ()


def add_process_observer(observer: OutboxObserver) -> None:
    """Give every outbox reader, already built or not, ``observer`` (a
    reader given an observer of the same class keeps its own). Metrics
    (``django_xsm.contrib.otel``) use it; idempotent."""
    global _process
    if not isinstance(observer, OutboxObserver):
        raise TypeError(f"{type(observer).__name__} is not an OutboxObserver")
    with _process_lock:
        if observer not in _process:
            _process = (*_process, observer)


def remove_process_observer(observer: OutboxObserver) -> None:
    """Stop giving readers ``observer``."""
    global _process
    with _process_lock:
        _process = tuple(o for o in _process if o is not observer)


def process_observers() -> tuple[OutboxObserver, ...]:
    """The observers every reader gets."""
    return _process


def observers_of(own: tuple[OutboxObserver, ...]) -> tuple[OutboxObserver, ...]:
    """``own`` and the process's observers of a class ``own`` has none of."""
    if not _process:
        return own
    shared = tuple(p for p in _process if not any(isinstance(o, type(p)) for o in own))
    return (*own, *shared)


def notify_taken(
    observers: tuple[OutboxObserver, ...], outbox: Any, leases: Sequence[OutboxLease]
) -> None:
    for observer in observers:
        try:  # an observer must not change what the reader does
            observer.taken(outbox, leases)
        except Exception:
            logger.exception("outbox observer %r failed after take()", observer)


def notify_ended(
    observers: tuple[OutboxObserver, ...],
    outbox: Any,
    ended: Sequence[tuple[OutboxLease, str]],
) -> None:
    for observer in observers:
        for lease, outcome in ended:
            try:
                observer.ended(outbox, lease, outcome)
            except Exception:
                logger.exception(
                    "outbox observer %r failed for %r (%s)",
                    observer,
                    lease.entry.delivery_id,
                    outcome,
                )
