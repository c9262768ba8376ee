"""MemoryLog: the reference transition log (see ``base.TransitionLogStore``)."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import threading
from collections.abc import Mapping
from typing import Any

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.base import (
    check_log_read,
    check_read_last,
    validate_key,
    wall_to_ms,
)
from django_xsm.persistence.codecs import dumps_text, loads_tagged
from django_xsm.persistence.records import LogEntry, TransitionRecord

__all__ = ["MemoryLog"]


class MemoryLog:
    """Thread-safe in-process transition log; ``maxlen`` keeps the newest."""

    def __init__(self, *, maxlen: int | None = None) -> None:
        if maxlen is not None and maxlen < 1:
            raise InvalidConfigError("maxlen must be a positive int or None", path="maxlen")
        self.maxlen = maxlen
        self._lock = threading.RLock()
        self._records: dict[str, list[TransitionRecord]] = {}
        self._last: dict[str, int] = {}

    def stage(
        self, key: str, entries: tuple[LogEntry, ...], *, version: int
    ) -> list[TransitionRecord]:
        """The records ``entries`` would become, numbered after the last
        seq, without writing: everything that can fail (encoding a payload)
        fails here, so a MemoryStore commit can check it before its first
        write. Call with the log's lock held, then :meth:`add_staged`."""
        last = self._last.get(key, 0)
        return [
            _private(entry.to_record(key, last + i, version))
            for i, entry in enumerate(entries, start=1)
        ]

    def add_staged(self, records: list[TransitionRecord]) -> int:
        """Append what :meth:`stage` returned; the first seq (0: none)."""
        for record in records:
            self._append(record)
        return records[0].seq if records else 0

    def _add(self, record: TransitionRecord) -> int:
        return self._append(_private(record))

    def _append(self, record: TransitionRecord) -> int:
        rows = self._records.setdefault(record.key, [])
        rows.append(record)
        self._last[record.key] = record.seq
        if self.maxlen is not None and len(rows) > self.maxlen:
            del rows[: len(rows) - self.maxlen]
        return record.seq

    def append(self, record: TransitionRecord) -> int:
        validate_key(record.key)
        with self._lock:
            last = self._last.get(record.key, 0)
            if record.seq <= last:
                raise InvalidConfigError(
                    f"seq {record.seq} is not above the last seq {last} of {record.key!r}",
                    path="record.seq",
                    hint="use append_next() to let the log number records",
                )
            return self._add(record)

    def append_next(self, key: str, entry: LogEntry, *, version: int) -> int:
        validate_key(key)
        with self._lock:
            seq = self._last.get(key, 0) + 1
            return self._add(entry.to_record(key, seq, version))

    def last_seq(self, key: str) -> int:
        with self._lock:
            return self._last.get(key, 0)

    def read(
        self, key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TransitionRecord]:
        validate_key(key)
        check_log_read(after_seq, limit)
        with self._lock:
            rows = [r for r in self._records.get(key, ()) if r.seq > after_seq]
        return rows if limit is None else rows[:limit]

    def read_last(self, key: str, *, count: int = 20) -> list[TransitionRecord]:
        validate_key(key)
        check_read_last(count)
        with self._lock:
            rows = self._records.get(key, [])
            return list(rows[-count:]) if count > 0 else []

    def purge_older_than(self, cutoff: float | _dt.datetime, *, key: str | None = None) -> int:
        limit_ms = wall_to_ms(cutoff)
        removed = 0
        with self._lock:
            for k in [key] if key is not None else list(self._records):
                rows = self._records.get(k, [])
                keep = [r for r in rows if r.timestamp_ms >= limit_ms]
                removed += len(rows) - len(keep)
                self._records[k] = keep
        return removed

    def count_older_than(self, cutoff: float | _dt.datetime, *, key: str | None = None) -> int:
        limit_ms = wall_to_ms(cutoff)
        with self._lock:
            return sum(
                1
                for k in ([key] if key is not None else list(self._records))
                for r in self._records.get(k, ())
                if r.timestamp_ms < limit_ms
            )

    def forget(self, key: str) -> int:
        with self._lock:
            self._last.pop(key, None)
            return len(self._records.pop(key, []))

    def counts(self) -> Mapping[str, int]:
        """Records held per key (for tests and inspection)."""
        with self._lock:
            return {k: len(v) for k, v in self._records.items()}


def _private(record: TransitionRecord) -> TransitionRecord:
    """Store what Redis would hand back: a private copy whose tagged values
    (Decimal, datetime...) read back as Python values."""
    return dataclasses.replace(record, payload=_round_trip(record.payload))


def _round_trip(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` is JSON-ready (tagged), as ``AuditPlugin`` produces it."""
    value = loads_tagged(dumps_text(dict(payload), "$.payload"))
    return value if isinstance(value, dict) else {}
