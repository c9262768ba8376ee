"""Retention: remove old transition-log records and expired idempotency
rows (``xsm_purge_logs``, ``xsm_purge_inbox``)."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable
from dataclasses import dataclass

from django_xsm import backend
from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.records import ms_to_datetime

from .timers import machine_entry

__all__ = ["CHUNK", "PurgeReport", "purge_inbox", "purge_logs"]

#: Keys whose machine ids are read in one round trip.
CHUNK = 500


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What :func:`purge_logs` removed (or, ``dry_run``, would remove):
    ``records`` from ``streams`` instance logs, all older than ``cutoff``."""

    records: int
    streams: int
    cutoff: _dt.datetime
    dry_run: bool


def purge_logs(
    older_than: _dt.timedelta | _dt.datetime,
    *,
    machine: str | None = None,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
    now: float | None = None,
) -> PurgeReport:
    """Remove transition-log records older than ``older_than``: an age
    (before ``now``, epoch seconds; default the wall clock) or an aware
    datetime. Only streams holding such records are visited (the log's
    per-bucket index), page by page; ``progress(key, records)`` is called
    per stream. ``machine``: only that machine's instances (logs of deleted
    instances belong to none). ``dry_run`` counts what would go.
    """
    entry = machine_entry(machine)
    found = backend.get_backend()
    log, store = found.log, found.store
    if isinstance(older_than, _dt.datetime):
        if older_than.tzinfo is None:
            raise InvalidConfigError(
                "A naive datetime is ambiguous",
                path="older_than",
                hint="give an aware datetime (datetime(..., tzinfo=timezone.utc))",
            )
        cutoff_ms = int(older_than.timestamp() * 1000)
    else:
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
    inbox = backend.get_inbox()
    if dry_run:
        expired = inbox.count_expired()
        return expired if limit is None else min(expired, limit)
    return inbox.purge_expired(limit=limit)
