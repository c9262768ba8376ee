"""What the ``xsm_*`` management commands do, as functions tests call directly.

Each command parses its arguments, calls one function here and prints what
it returns; everything runs on the process backend built from
``settings.XSM`` (:mod:`django_xsm.stores`). Functions raise the library's
own errors: ``StoreUnavailableError`` when Redis cannot be reached,
``UnknownMachineError`` for a machine name that is not configured,
``InstanceNotFoundError`` for an absent key.

::

    from django_xsm import operations
    operations.scan_timers(limit=1000)              # ScanResult
    operations.purge_logs(timedelta(days=30))       # PurgeReport
    operations.purge_inbox()                        # rows removed
    operations.inspect_instance("order:42", log=5)  # JSON-ready dict
    operations.forget_instance("order:42")          # counts per kind
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django_xsm import stores
from django_xsm.exceptions import StoreError
from django_xsm.persistence.records import ms_to_datetime
from django_xsm.persistence.timers import DueTimerScanner, ScanResult
from django_xsm.registry import MachineEntry, machines

from .instance_ops import forget_instance, forget_preview, inspect_instance, iso, machine_name

__all__ = [
    "DueTimer",
    "LoopResult",
    "PurgeReport",
    "dead_letters",
    "due_timers",
    "forget_instance",
    "forget_preview",
    "inspect_instance",
    "iso",
    "purge_inbox",
    "purge_logs",
    "run_scanner",
    "scan_timers",
]

logger = logging.getLogger("django_xsm.commands")

#: With ``machine=``, at most this many due keys are read to find ``limit``
#: of that machine's (the due index is shared by every machine).
MAX_DUE_FETCH = 10_000
#: Keys whose machine ids are read in one round trip.
CHUNK = 500


def _entry(name: str | None) -> MachineEntry | None:
    # machines[name] raises UnknownMachineError listing the registered names
    # (ImproperlyConfigured for one that failed to load).
    return None if name is None else machines[name]


# --- timers -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DueTimer:
    """One instance with a deadline due: its ``machine`` (registry name, or
    the stored machine id when it is not configured), the earliest due time
    and how late it is (``lag_ms``)."""

    key: str
    machine: str
    due_ms: int
    lag_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "machine": self.machine,
            "due_at": iso(self.due_ms),
            "lag_ms": self.lag_ms,
        }


@dataclass(frozen=True, slots=True)
class LoopResult:
    """Totals of :func:`run_scanner` over ``passes`` scans."""

    total: ScanResult
    passes: int


def _due(
    scanner: DueTimerScanner, entry: MachineEntry | None, now: int, limit: int, *, ids: bool
) -> tuple[list[tuple[str, int]], dict[str, str]]:
    fetch = limit
    while True:
        rows = scanner.due(now, limit=fetch)
        found = scanner.store.machine_ids([k for k, _ in rows]) if ids or entry else {}
        if entry is None:
            return rows, found
        mine = [(k, d) for k, d in rows if found.get(k) == entry.machine.id]
        if len(mine) >= limit or len(rows) < fetch or fetch >= MAX_DUE_FETCH:
            return mine[:limit], found
        fetch = min(fetch * 4, MAX_DUE_FETCH)


def due_timers(
    *, machine: str | None = None, limit: int = 100, scanner: DueTimerScanner | None = None
) -> list[DueTimer]:
    """What a scan would fire now (``xsm_scan_timers --dry-run``), earliest
    first; fires nothing."""
    entry = _entry(machine)
    scanner = scanner or stores.get_scanner()
    now = scanner.clock()
    rows, found = _due(scanner, entry, now, limit, ids=True)
    return [DueTimer(k, machine_name(found.get(k, "")), d, now - d) for k, d in rows]


def dead_letters(*, machine: str | None = None, limit: int = 100) -> list[tuple[str, str, int]]:
    """Instances with dead-lettered timers, oldest first: ``(key,
    machine, parked at ms)``. Scans skip them until their state changes or
    they are fired by hand (``DueTimerScanner.fire(key, force=True)``)."""
    entry = _entry(machine)
    store = stores.get_store()
    rows = store.dead_letters(limit=limit if entry is None else MAX_DUE_FETCH)
    found = store.machine_ids([k for k, _ in rows])
    if entry is not None:
        rows = [(k, t) for k, t in rows if found.get(k) == entry.machine.id][:limit]
    return [(k, machine_name(found.get(k, "")), t) for k, t in rows]


def scan_timers(
    *,
    machine: str | None = None,
    limit: int = 1000,
    lock: str | None = None,
    stop: threading.Event | None = None,
    on_fire: Callable[[str, ScanResult], None] | None = None,
    scanner: DueTimerScanner | None = None,
) -> ScanResult:
    """One pass: fire the due deadlines of up to ``limit`` instances (of
    ``machine`` only, when given), earliest first. Stops between two
    instances once ``stop`` is set. ``on_fire(key, outcome)`` is called per
    instance. Each deadline fires at most once however many scanners run
    (``DueTimerScanner.fire``); ``StoreUnavailableError`` propagates."""
    entry = _entry(machine)
    scanner = scanner or stores.get_scanner(lock=lock)
    result = ScanResult()
    rows, _ = _due(scanner, entry, scanner.clock(), limit, ids=False)
    for key, _due_ms in rows:
        if stop is not None and stop.is_set():
            break
        outcome = scanner.fire(key)
        result.scanned += 1
        result.merge(outcome)
        if on_fire is not None:
            on_fire(key, outcome)
    return result


def run_scanner(
    *,
    stop: threading.Event,
    interval_s: float = 1.0,
    machine: str | None = None,
    limit: int = 1000,
    lock: str | None = None,
    on_pass: Callable[[ScanResult, str | None], None] | None = None,
    on_fire: Callable[[str, ScanResult], None] | None = None,
) -> LoopResult:
    """Scan every ``interval_s`` seconds until ``stop`` is set (the daemon).

    A pass that filled its ``limit`` and fired something is followed by
    another at once. A store error (Redis down, a damaged index) is passed
    to ``on_pass(result, message)`` and waited out; ``stop`` is honoured
    between instances and during the wait.
    """
    _entry(machine)  # an unknown name fails now, not on every pass
    total = ScanResult()
    passes = 0
    while not stop.is_set():
        message: str | None = None
        try:
            result = scan_timers(
                machine=machine, limit=limit, lock=lock, stop=stop, on_fire=on_fire
            )
        except StoreError as exc:
            logger.warning("xsm_scan_timers: %s", exc)
            result, message = ScanResult(errors=1), exc.message
        passes += 1
        total.merge(result)
        if on_pass is not None:
            on_pass(result, message)
        if message is None and result.scanned >= limit and result.fired:
            continue
        stop.wait(interval_s)
    return LoopResult(total, passes)


# --- logs and inbox ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What :func:`purge_logs` removed (or, ``dry_run``, would remove):
    ``records`` from ``streams`` instance logs, all older than ``cutoff``."""

    records: int
    streams: int
    cutoff: _dt.datetime
    dry_run: bool


def purge_logs(
    older_than: _dt.timedelta,
    *,
    machine: str | None = None,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
    now: float | None = None,
) -> PurgeReport:
    """Remove transition-log records older than ``older_than`` (before
    ``now``, seconds since the epoch; default the wall clock).

    Only streams holding such records are visited (the log's per-bucket
    index), page by page; ``progress(key, records)`` is called per stream.
    ``machine`` keeps the instances of that machine (logs of deleted
    instances belong to none). ``dry_run`` removes nothing and counts what
    would go.
    """
    entry = _entry(machine)
    backend = stores.get_backend()
    log, store = backend.log, backend.store
    wall = time.time() if now is None else now
    cutoff_ms = int((wall - older_than.total_seconds()) * 1000)
    cutoff = ms_to_datetime(cutoff_ms)
    streams = records = 0

    def seen(key: str, removed: int) -> None:
        nonlocal streams, records
        if removed:
            streams += 1
            records += removed
        if progress is not None:
            progress(key, removed)

    if entry is None:
        if dry_run:
            log.count_older_than(cutoff, progress=seen)
        else:
            log.purge_older_than(cutoff, progress=seen)
        return PurgeReport(records, streams, cutoff, dry_run)
    for bucket in range(log.bucket_count()):
        # Collected before any removal: purging moves keys in the index.
        candidates = log.streams_older_than(cutoff, bucket=bucket)
        for start in range(0, len(candidates), CHUNK):
            chunk = candidates[start : start + CHUNK]
            owners = store.machine_ids(chunk)
            for key in chunk:
                if owners.get(key) != entry.machine.id:
                    continue
                if dry_run:
                    seen(key, log.count_older_than(cutoff, key=key))
                else:
                    seen(key, log.purge_older_than(cutoff, key=key))
    return PurgeReport(records, streams, cutoff, dry_run)


def purge_inbox(*, dry_run: bool = False, limit: int | None = None) -> int:
    """Remove expired idempotency rows (at most ``limit``); returns how
    many were (``dry_run``: would be) removed. The cost grows with the
    expired rows, not with the rows kept."""
    inbox = stores.get_inbox()
    if dry_run:
        expired = inbox.count_expired()
        return expired if limit is None else min(expired, limit)
    return inbox.purge_expired(limit=limit)
