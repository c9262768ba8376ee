"""Telling an instance that an effect it emitted will never happen: the
``xsm.outbox.failed`` event a dead-lettered entry's instance receives
through the registry's manager (docs/outbox.md, Compensation).

It is sent at most once per delivery id: the delivery id is its
idempotency key, with a fingerprint of the delivery id alone, so a replay
by another worker (whose error text or attempt count may differ) is not
applied twice. Outcomes: ``sent``, ``duplicate``, ``refused`` (never
retried) and ``deferred`` (store trouble: the worker tries again later).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from django.core.exceptions import ImproperlyConfigured

from django_xsm import conf
from django_xsm.brief import brief
from django_xsm.exceptions import (
    IdempotencyInFlightError,
    InstanceNotFoundError,
    SnapshotCorruptError,
    SnapshotTooLargeError,
    StoreError,
    UnknownMachineError,
)
from django_xsm.persistence import retry_on_conflict
from django_xsm.persistence.idempotency import event_fingerprint
from django_xsm.persistence.outbox import OutboxEntry
from django_xsm.registry import machines

from .policy import clean_text

__all__ = [
    "ACTOR",
    "FAILED_EVENT",
    "PRINCIPAL",
    "Compensation",
    "compensate",
    "compensation_event",
    "trace_id",
]

#: The event type a dead-lettered entry's instance receives.
FAILED_EVENT = "xsm.outbox.failed"
#: Who the transition log says sent it.
ACTOR = "xsm:outbox"
#: The idempotency scope of compensations: no user request shares it.
PRINCIPAL = "xsm:outbox"
_TRACE_FIELDS = ("correlation_id", "request_id", "trace_id", "traceparent")

Outcome = Literal["sent", "duplicate", "refused", "deferred"]
#: Store errors that say nothing about the instance: try again later.
_PERMANENT = (InstanceNotFoundError, SnapshotCorruptError, SnapshotTooLargeError)


@dataclass(frozen=True, slots=True)
class Compensation:
    """What became of one compensation: ``sent`` (applied now),
    ``duplicate`` (applied before, replayed), ``refused`` (``reason``: no
    transition takes it, the instance or its machine is gone, an action
    raised) or ``deferred`` (store trouble; ``reason`` says which)."""

    outcome: Outcome
    reason: str = ""


def trace_id(event: Mapping[str, Any]) -> str:
    """The request or trace id the event carries (``correlation_id``,
    ``request_id``, ``trace_id`` or ``traceparent``), else ''."""
    for name in _TRACE_FIELDS:
        value = event.get(name)
        if isinstance(value, str) and value:
            return clean_text(value, 200)
    return ""


def compensation_event(entry: OutboxEntry, error: str, attempts: int) -> dict[str, Any]:
    """The ``xsm.outbox.failed`` event for ``entry``."""
    return {
        "type": FAILED_EVENT,
        "event": dict(entry.event),
        "error": error,
        "attempts": attempts,
        "delivery_id": entry.delivery_id,
    }


def compensate(entry: OutboxEntry, error: str, attempts: int) -> Compensation:
    """Send :func:`compensation_event` to the instance that emitted ``entry``
    (at most once per delivery id; see the module docstring)."""
    name = machines.name_for_machine_id(entry.machine)
    if name is None:
        return Compensation(
            "refused", f"machine id {entry.machine!r} is not registered in XSM['MACHINES']"
        )
    try:
        manager = machines[name].objects
    except (UnknownMachineError, ImproperlyConfigured) as exc:
        return Compensation("refused", str(exc))
    event = compensation_event(entry, error, attempts)
    payload = {k: v for k, v in event.items() if k != "type"}
    fingerprint = event_fingerprint(FAILED_EVENT, {"delivery_id": entry.delivery_id})

    def attempt() -> Any:
        with manager.open(
            entry.key,
            actor=ACTOR,
            idempotency_key=entry.delivery_id,
            fingerprint=fingerprint,
            principal=PRINCIPAL,
            create=False,
            strict=False,
            correlation_id=trace_id(entry.event),
        ) as block:
            reason = f"outbox delivery {entry.delivery_id} dead-lettered"
            return block.send_reserved(FAILED_EVENT, reason=reason, **payload)

    try:
        receipt = retry_on_conflict(attempt, attempts=1 + conf.get_settings().conflict_retries)
    except _PERMANENT as exc:
        return Compensation("refused", exc.message)
    except (StoreError, IdempotencyInFlightError) as exc:
        return Compensation("deferred", f"{type(exc).__name__}: {exc.message}")
    except Exception as exc:  # an action, a guard or a receiver raised on the event
        return Compensation("refused", clean_text(f"{type(exc).__name__}: {exc}", 300))
    if not receipt.accepted:
        return Compensation(
            "refused", f"no transition takes {FAILED_EVENT} in {brief(receipt.value)}"
        )
    return Compensation("duplicate" if getattr(receipt, "duplicate", False) else "sent")
