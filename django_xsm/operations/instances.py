"""Inspect and forget one instance (``xsm_inspect``, ``xsm_forget``, the
admin's "forget")."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm import backend, conf
from django_xsm.engine import Deadline
from django_xsm.exceptions import InstanceNotFoundError, SnapshotCorruptError, XsmError
from django_xsm.persistence.arguments import validate_key
from django_xsm.persistence.audit import DEFAULT_REDACT, redact
from django_xsm.persistence.base import system_clock_ms
from django_xsm.persistence.records import TimerFailure, ms_to_datetime
from django_xsm.persistence.timer_state import INSTANCE_FAILURE, failure_key
from django_xsm.registry import machines

__all__ = ["forget_instance", "forget_preview", "inspect_instance", "iso", "redacted"]


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (``...Z``)."""
    return ms_to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def redacted(value: Any) -> Any:
    """``value`` with sensitive fields hidden: the default denylist plus the
    ``AUDIT['REDACT']`` fragments (what the transition log hides)."""
    return redact(value, [*DEFAULT_REDACT, *conf.get_settings().audit.redact])


def _failure(failure: TimerFailure | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {
        "attempts": failure.attempts,
        "next_attempt_at": iso(failure.next_attempt_ms),
        "dead_lettered": failure.dead,
        "error": failure.error,
    }


def inspect_instance(key: str, *, log: int = 10, now_ms: int | None = None) -> dict[str, Any]:
    """Everything stored about instance ``key``, JSON-ready, with the
    context and log payloads redacted (``persistence.audit.redact`` with
    the ``AUDIT['REDACT']`` fragments): machine, state value and ids,
    status, context, versions, update time, lock, deadlines with their
    failures (dead-lettered ones too) and the last ``log`` transitions.

    Raises ``InstanceNotFoundError`` when nothing is stored under ``key``.
    An instance whose machine is not configured, or fails to restore, is
    still shown from its raw snapshot, with ``problem`` saying why.
    """
    validate_key(key)
    current = backend.get_backend()
    record = current.store.load(key)
    if record is None:
        raise InstanceNotFoundError(key)
    now = system_clock_ms() if now_ms is None else now_ms
    snap = record.snapshot
    machine_id = record.owner
    name = machines.name_for_machine_id(machine_id)
    value, status = snap.get("value"), str(snap.get("status", ""))
    context, state_ids = snap.get("context") or {}, []
    problem = None
    try:
        deadlines = [Deadline.from_dict(d) for d in snap.get("deadlines") or ()]
    except ValueError as exc:
        deadlines, problem = [], f"the stored deadlines are malformed ({exc})"
    if name is None:
        problem = f"machine {machine_id!r} is not in XSM['MACHINES']; showing the raw snapshot"
    else:
        try:
            instance = machines[name].machine.restore(snap)
        except (XsmError, ImproperlyConfigured) as exc:
            problem = f"the configured machine cannot restore it ({exc}); showing the raw snapshot"
        else:
            value, status = instance.value, str(instance.status)
            context, state_ids = dict(instance.context), list(instance.state_ids)
            deadlines = list(instance.deadlines)
    failures = dict(record.timer_failures)
    blanket = failures.get(INSTANCE_FAILURE)
    shown = []
    for d in sorted(deadlines, key=lambda d: (d.due_ms, d.entry)):
        failure = failures.get(failure_key(d))
        shown.append(
            {
                "state": d.state_id,
                "event": d.event_type,
                "delay": d.delay,
                "due_at": iso(d.due_ms),
                "due_in_ms": d.due_ms - now,
                "failure": _failure(failure),
                "dead_lettered": bool((failure and failure.dead) or (blanket and blanket.dead)),
            }
        )
    history = current.log.read_last(key, count=log) if log > 0 else []
    return {
        "key": key,
        "machine": name,
        "machine_id": machine_id,
        "machine_version": record.machine_version,
        "version": record.version,
        "updated_at": iso(record.updated_ms),
        "status": status,
        "value": value,
        "state_ids": state_ids,
        "context": redacted(context),
        "locked": current.store.lock_holder(key) is not None,
        "deadlines": shown,
        "instance_failure": _failure(blanket),
        "dead_lettered": any(d["dead_lettered"] for d in shown) or bool(blanket and blanket.dead),
        "problem": problem,
        "transitions": [
            {
                "seq": r.seq,
                "version": r.version,
                "at": iso(r.timestamp_ms),
                "event": r.event_type,
                "from": r.from_state,
                "to": r.to_state,
                "accepted": r.accepted,
                "actor": r.actor,
                "reason": r.reason,
                "payload": redacted(dict(r.payload)),
                "idempotency_key": r.idempotency_key,
                "correlation_id": r.correlation_id,
            }
            for r in history
        ],
    }


def forget_preview(key: str) -> dict[str, Any]:
    """What :func:`forget_instance` would erase: ``record`` (machine,
    version, state; ``{"damaged": why}`` for an undecodable one) or None,
    ``log`` (True when a transition log exists), ``idempotency`` (rows),
    and ``empty`` when nothing is stored."""
    validate_key(key)
    current = backend.get_backend()
    described: dict[str, Any] | None = None
    try:
        record = current.store.load(key)
    except SnapshotCorruptError as exc:  # a damaged record can still be erased
        record, described = None, {"damaged": exc.message}
    if record is not None:
        machine_id = record.owner
        described = {
            "machine": machines.name_for_machine_id(machine_id, machine_id),
            "version": record.version,
            "value": record.snapshot.get("value"),
            "updated_at": iso(record.updated_ms),
        }
    try:
        has_log = bool(current.log.read_last(key, count=1))
    except SnapshotCorruptError:
        has_log = True
    rows = current.inbox.count_for_instance(key)
    return {
        "key": key,
        "record": described,
        "log": has_log,
        "idempotency": rows,
        "empty": described is None and not has_log and rows == 0,
    }


def forget_instance(key: str) -> dict[str, int]:
    """Erase everything the namespace holds about ``key``: the record, its
    deadlines and timer bookkeeping, the lock and the transition log (one
    atomic script), then its idempotency rows. Returns counts per kind
    (``snapshot``, ``deadlines``, ``lock``, ``log``, ``idempotency``).
    Only the highest version number stays, so a re-created instance never
    reuses a version."""
    validate_key(key)
    current = backend.get_backend()
    counts = dict(current.store.forget(key))
    counts["idempotency"] = current.inbox.forget_instance(key)
    return counts
