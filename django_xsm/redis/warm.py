"""What this process last committed, per key: the warm records a
speculative open answers from without a round trip.

An entry is the snapshot hash's fields exactly as OPEN would read them
right after our commit or read (``d v mv m u``), the floor, and the
record's newest commit id, so a warm open parses them with the same code
as a cold one and hands the block the same record. Nothing here is
trusted: a warm record may be stale (another worker committed since),
and the block's commit proves it is not, with the version and that
commit id (``CommitUnit.base_commit_id``). Stale entries cost one
conflict, never a wrong write. Records with timer bookkeeping (``tf``)
are never kept: the scanner changes it without a commit.

The table is bounded by entries and by snapshot bytes (least recently
used entries go first; a snapshot over a sixteenth of the byte budget is
never kept) and shared by the threads of one store, behind a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from django_xsm.exceptions import InvalidConfigError, brief

__all__ = ["MAX_WARM_RECORDS", "WarmRecords", "validate_warm_size"]

Fields = Mapping[bytes, bytes]

#: More than this many warm records is a memory leak, not a cache.
MAX_WARM_RECORDS = 10_000_000
#: Snapshot bytes one store keeps at most (64 MiB).
WARM_BYTES = 64 * 1024 * 1024


def validate_warm_size(value: object) -> int:
    """``warm_records``: an int from 0 (never warm) to MAX_WARM_RECORDS."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WARM_RECORDS:
        raise InvalidConfigError(
            f"warm_records must be an int from 0 to {MAX_WARM_RECORDS}, got {brief(value)}",
            path="warm_records",
            hint="0 makes speculative opens plain reads",
        )
    return value


class WarmRecords:
    """Up to ``size`` keys' last committed fields, floor and commit id,
    holding at most ``max_bytes`` of snapshots."""

    def __init__(self, size: int, *, max_bytes: int = WARM_BYTES) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._rows: OrderedDict[str, tuple[Fields, int, str]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: str) -> tuple[Fields, int, str] | None:
        """``(fields, floor, commit id)`` of ``key``, or None when not warm."""
        with self._lock:
            row = self._rows.get(key)
            if row is not None:
                self._rows.move_to_end(key)
            return row

    def put(self, key: str, fields: Fields, floor: int, commit_id: str) -> None:
        size = len(fields.get(b"d", b""))
        if b"tf" in fields or not commit_id or size * 16 > self.max_bytes:
            # timer bookkeeping changes without a commit; no commit id, no
            # proof; a huge snapshot would push out everything else
            self.drop(key)
            return
        with self._lock:
            self._pop(key)
            self._rows[key] = (fields, floor, commit_id)
            self.bytes += size
            while len(self._rows) > self.size or self.bytes > self.max_bytes:
                self._pop(next(iter(self._rows)))

    def drop(self, key: str) -> None:
        """Forget ``key`` (its commit failed, conflicted or was deleted)."""
        with self._lock:
            self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self.bytes = 0

    def _pop(self, key: str) -> None:
        row = self._rows.pop(key, None)
        if row is not None:
            self.bytes -= len(row[0].get(b"d", b""))
