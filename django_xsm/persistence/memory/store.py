"""MemoryStore: the reference StateStore (see ``base.StateStore``).

A commit holds the store's, the inbox's and the log's locks together
(always in that order), so it is atomic for every reader; an inbox or log
of another kind is refused (``require_shared_commit``).
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from django_xsm.exceptions import ConflictError, InvalidConfigError, SnapshotTooLargeError
from django_xsm.persistence.base import (
    Codec,
    iter_pages,
    require_shared_commit,
    system_clock_ms,
    validate_key,
    validate_limit,
    validate_positive_int,
    validate_seconds,
    validate_text,
    validate_ttl_s,
)
from django_xsm.persistence.codecs import JsonCodec, dumps_text, encode_snapshot, loads_tagged
from django_xsm.persistence.keywords import StoreKeywords
from django_xsm.persistence.locks import StoreLock
from django_xsm.persistence.outbox import OutboxEntry
from django_xsm.persistence.records import (
    CommitResult,
    CommitUnit,
    OpenRequest,
    OpenResult,
    StoredRecord,
    TimerFailure,
    TimerFailures,
    check_commit_id,
    save_unit,
)

from .inbox import MemoryInbox
from .log import MemoryLog
from .rows import Row as _Row

__all__ = ["MemoryStore"]

Clock = Callable[[], int]


class MemoryStore(StoreKeywords[tuple[list[str], str], list[tuple[str, int]], bool]):
    """A :class:`~django_xsm.persistence.base.StateStore` in a dict."""

    def __init__(
        self,
        *,
        codec: Codec | None = None,
        max_snapshot_bytes: int = 1024 * 1024,
        ttl_s: float | None = None,
        lock_ttl_ms: int = 30_000,
        clock: Clock | None = None,
        log: MemoryLog | None = None,
    ) -> None:
        self.codec: Codec = codec or JsonCodec()
        self.max_snapshot_bytes = max_snapshot_bytes
        self.ttl_s = ttl_s
        self.lock_ttl_ms = lock_ttl_ms
        self.clock: Clock = clock or system_clock_ms
        # The log forget() erases with the record (Redis keeps both in one
        # namespace; in memory they are separate objects).
        self.log = log
        #: What commits emitted, in commit order (this backend delivers
        #: nothing: the outbox workers run on Redis; tests read it here).
        self.outbox: list[OutboxEntry] = []
        self._lock = threading.RLock()
        #: Notified whenever a lock is released: its waiters open again.
        self._unlocked = threading.Condition(self._lock)
        self._rows: dict[str, _Row] = {}
        self._floors: dict[str, int] = {}
        self._locks: dict[str, tuple[str, int]] = {}
        self._due: dict[str, int] = {}
        self._dead: dict[str, int] = {}
        self._parked: dict[str, str] = {}  # key -> why it cannot be read

    # --- settings (checked when set, as by the constructor) ------------------

    @property
    def max_snapshot_bytes(self) -> int:
        """The encoded snapshot limit, on save and on load."""
        return self._max_snapshot_bytes

    @max_snapshot_bytes.setter
    def max_snapshot_bytes(self, value: int) -> None:
        self._max_snapshot_bytes = validate_positive_int(value, "max_snapshot_bytes")

    @property
    def ttl_s(self) -> float | None:
        return self._ttl_s

    @ttl_s.setter
    def ttl_s(self, value: float | None) -> None:
        self._ttl_s = validate_ttl_s(value)

    @property
    def lock_ttl_ms(self) -> int:
        return self._lock_ttl_ms

    @lock_ttl_ms.setter
    def lock_ttl_ms(self, value: int) -> None:
        self._lock_ttl_ms = validate_positive_int(value, "lock_ttl_ms")

    # --- reading ---------------------------------------------------------

    def _live(self, key: str, now: int) -> _Row | None:
        row = self._rows.get(key)
        if row is not None and row.expires_ms is not None and row.expires_ms <= now:
            self._drop(key)
            return None
        return row

    def _drop(self, key: str) -> None:
        row = self._rows.pop(key, None)
        if row is not None:
            self._floors[key] = max(self._floors.get(key, 0), row.version)
        self._due.pop(key, None)
        self._dead.pop(key, None)
        self._parked.pop(key, None)

    def _record(self, key: str, row: _Row) -> StoredRecord:
        if len(row.data) > self.max_snapshot_bytes:  # written under a larger limit
            raise SnapshotTooLargeError(
                key, size=len(row.data), limit=self.max_snapshot_bytes, stored=True
            )
        snapshot = self.codec.decode(row.data, key=key, version=row.version)
        return StoredRecord(
            key=key,
            snapshot=snapshot,
            version=row.version,
            machine_version=row.machine_version,
            updated_ms=row.updated_ms,
            machine_id=row.machine_id,
            timer_failures=dict(row.failures),
        )

    def load(self, key: str) -> StoredRecord | None:
        validate_key(key)
        with self._lock:
            row = self._live(key, self.clock())
            return None if row is None else self._record(key, row)

    def open(self, request: OpenRequest, *, inbox: MemoryInbox | None = None) -> OpenResult:
        """Lock, claims and load under one critical section."""
        validate_key(request.key)
        with self._lock:
            now = self.clock()
            if request.lock_token:
                busy = self._lock_busy(request.key, request.lock_token, now)
                if busy:
                    return OpenResult(record=None, lock_busy_ms=busy)
            outcomes = inbox.claim_all(request.claims) if inbox and request.claims else ()
            if request.lock_token and all(o.status == "claimed" for o in outcomes):
                self._locks[request.key] = (request.lock_token, now + request.lock_ttl_ms)
            row = self._live(request.key, now)
            return OpenResult(
                record=None if row is None else self._record(request.key, row),
                floor=self._floors.get(request.key, 0),
                locked=bool(request.lock_token) and all(o.status == "claimed" for o in outcomes),
                claims=tuple(outcomes),
            )

    # --- writing ---------------------------------------------------------

    def shares_commit(self, other: object) -> bool:
        return isinstance(other, MemoryInbox | MemoryLog)

    def commit(
        self,
        unit: CommitUnit,
        *,
        inbox: Any = None,
        log: Any = None,
    ) -> CommitResult:
        """Atomic with a MemoryInbox / MemoryLog (their locks are held with
        ours); any other inbox or log is an ``InvalidConfigError``."""
        require_shared_commit(self, inbox=inbox, log=log)
        validate_key(unit.key)
        check_commit_id(unit.commit_id)
        data = encode_snapshot(self.codec, unit, self.max_snapshot_bytes)  # raises before any write
        shared_inbox = isinstance(inbox, MemoryInbox)
        shared_log = isinstance(log, MemoryLog)
        inbox_lock = inbox._lock if shared_inbox else contextlib.nullcontext()
        log_lock = log._lock if shared_log else contextlib.nullcontext()
        with self._lock, inbox_lock, log_lock:
            now = self.clock()
            row = self._live(unit.key, now)
            seen = row.applied(unit.commit_id) if row is not None else None
            if row is not None and seen is not None:
                return CommitResult(version=seen, updated_ms=row.updated_ms, replayed=True)
            self._check_fences(unit, row, now)
            if unit.marks and shared_inbox:
                claims = [m.claim for m in unit.marks]
                actual = row.version if row is not None else None
                inbox.check_owned(claims, unit.key, unit.expected_version, actual)
            version = row.version if row is not None else 0
            if data is not None:
                version = unit.new_version
            # Stage what can still fail (log payloads, receipts) before the
            # first write: a commit lands whole or not at all.
            staged_marks = [inbox.stage_mark(m, now) for m in unit.marks] if shared_inbox else []
            staged_log = (
                log.stage(unit.key, unit.log_entries, version=version) if shared_log else []
            )
            staged_outbox = [
                OutboxEntry(
                    e.delivery_id,
                    unit.key,
                    unit.machine_id,
                    version,
                    loads_tagged(dumps_text(dict(e.event), "$.emitted")),  # as Redis reads it
                    emitted_ms=now,
                )
                for e in unit.emitted
            ]
            if data is not None:
                row = _Row(
                    data=data,
                    version=version,
                    machine_id=unit.machine_id,
                    machine_version=unit.machine_version,
                    updated_ms=now,
                    commits=row.remember(unit.commit_id, version) if row is not None else (),
                    state_ids=unit.state_ids,
                    failures=dict(row.failures) if row is not None else {},
                )
                if not row.commits:
                    row.commits = ((unit.commit_id, version),)
                self._rows[unit.key] = row
                self._floors[unit.key] = version
                self._index_due(unit.key, unit.next_due_ms)
                if self._parked.pop(unit.key, None) is not None and not row.failures:
                    self._dead.pop(unit.key, None)  # readable again
            elif row is not None:
                row.commits = row.remember(unit.commit_id, version)
            if row is not None:
                if unit.timer_failures is not None:
                    row.failures = dict(unit.timer_failures)
                    self._index_dead(unit.key, row.failures, now)
                if self.ttl_s is not None:
                    row.expires_ms = now + int(self.ttl_s * 1000)
            if shared_inbox:
                inbox.put_staged(staged_marks)
                for release in unit.releases:
                    inbox.release(release)
            first_seq = log.add_staged(staged_log) if shared_log else 0
            self.outbox.extend(staged_outbox)
            if unit.release_lock and unit.lock_token:
                self._release(unit.key, unit.lock_token)
        return CommitResult(version=version, first_seq=first_seq, updated_ms=now)

    def _check_fences(self, unit: CommitUnit, row: _Row | None, now: int) -> None:
        actual = row.version if row is not None else None
        if row is None:
            if unit.expected_version != 0 or self._floors.get(unit.key, 0) != unit.floor:
                raise ConflictError(unit.key, expected=unit.expected_version, actual=actual)
        elif row.version != unit.expected_version:
            raise ConflictError(unit.key, expected=unit.expected_version, actual=actual)
        held = self._locks.get(unit.key)
        if held is not None and held[1] <= now:
            del self._locks[unit.key]
            held = None
        if (held is not None and held[0] != unit.lock_token) or (unit.lock_token and held is None):
            raise ConflictError(
                unit.key,
                expected=unit.expected_version,
                actual=actual,
                reason="lock",
                held_lock=bool(unit.lock_token),
            )

    def _index_due(self, key: str, due: int | None) -> None:
        if due is None:
            self._due.pop(key, None)
        else:
            self._due[key] = due

    def _index_dead(self, key: str, failures: Mapping[str, TimerFailure], now: int) -> None:
        if any(f.dead for f in failures.values()):
            self._dead.setdefault(key, now)
        else:
            self._dead.pop(key, None)

    def save(self, key: str, snapshot: Mapping[str, Any], *, expected_version: int) -> int:
        with self._lock:
            floor = self._floors.get(key, 0) if expected_version == 0 else 0
            unit = save_unit(key, snapshot, expected_version=expected_version, floor=floor)
            return self.commit(unit).version

    def _record_timer_failure(
        self, key: str, expected: int, failures: TimerFailures, due_ms: int | None
    ) -> bool:
        validate_key(key)
        with self._lock:
            now = self.clock()
            row = self._live(key, now)
            if row is None or row.version != expected:
                return False
            row.failures = dict(failures)
            self._index_due(key, due_ms)
            self._index_dead(key, row.failures, now)
            return True

    # --- locks ------------------------------------------------------------

    def _lock_busy(self, key: str, token: str, now: int) -> int:
        held = self._locks.get(key)
        if held is None or held[1] <= now or held[0] == token:
            return 0
        return held[1] - now

    def acquire_lock(self, key: str, token: str, ttl_ms: int) -> int:
        validate_key(key)
        with self._lock:
            now = self.clock()
            busy = self._lock_busy(key, token, now)
            if not busy:
                self._locks[key] = (token, now + ttl_ms)
            return busy

    def _release(self, key: str, token: str) -> bool:
        held = self._locks.get(key)
        if held is not None and held[0] == token:
            del self._locks[key]
            self._unlocked.notify_all()
            return held[1] > self.clock()
        return False

    def wait_unlocked(self, key: str, seconds: float) -> bool:
        """Block until a lock is released, at most ``seconds``; True when
        woken (or when ``key`` is not locked). Like Redis' wake list, it
        may wake early: callers try again."""
        validate_key(key)
        validate_seconds(seconds)
        with self._unlocked:
            if not self._lock_busy(key, "", self.clock()):
                return True
            if not seconds > 0:  # no time (or NaN): do not wait
                return False
            return self._unlocked.wait(min(seconds, 60.0))

    def release_lock(self, key: str, token: str) -> bool:
        validate_key(key)
        validate_text(token, "token")
        with self._lock:
            return self._release(key, token)

    def lock(self, key: str, *, timeout: float = 1.0, ttl_ms: int | None = None) -> StoreLock:
        """``with store.lock(key) as token:`` (see StoreLock)."""
        return StoreLock(self, key, timeout=timeout, ttl_ms=ttl_ms)

    def lock_holder(self, key: str) -> str | None:
        """The token holding ``key``'s lock, for tests and inspection."""
        validate_key(key)
        with self._lock:
            held = self._locks.get(key)
            return held[0] if held and held[1] > self.clock() else None

    # --- removal and listing ------------------------------------------------

    def delete(self, key: str) -> bool:
        validate_key(key)
        with self._lock:
            existed = self._live(key, self.clock()) is not None
            self._drop(key)
            return existed

    def forget(self, key: str) -> dict[str, int]:
        validate_key(key)
        log = self.log
        with self._lock:
            counts = {
                "snapshot": int(self._live(key, self.clock()) is not None),
                "deadlines": int(key in self._due),
                "lock": int(self._locks.pop(key, None) is not None),
                "log": log.forget(key) if log is not None else 0,
            }
            self._drop(key)
            if counts["lock"]:
                self._unlocked.notify_all()
            return counts

    def _sorted_live(self, machine: str | None, state: str | None) -> list[str]:
        now = self.clock()
        return sorted(
            k
            for k in list(self._rows)
            if (row := self._live(k, now)) is not None
            and (machine is None or row.machine_id == machine)
            and (state is None or state in row.state_ids)
        )

    def _list_page(
        self, prefix: str, after: str, limit: int, machine: str | None, state: str | None
    ) -> tuple[list[str], str]:
        with self._lock:
            keys = self._sorted_live(machine, state)
        # Keys sharing a prefix are contiguous in code-point order.
        start = bisect.bisect_left(keys, prefix)
        if after:
            start = max(start, bisect.bisect_right(keys, after))
        matching: list[str] = []
        for k in itertools.islice(keys, start, None):
            if not k.startswith(prefix) or len(matching) > limit:
                break
            matching.append(k)
        page = matching[:limit]
        return page, (page[-1] if len(matching) > limit and page else "")

    def list_keys(self, prefix: str = "", *, machine: str | None = None) -> Iterator[str]:
        return iter_pages(self.list_page, prefix, machine)

    def _due_keys(self, until: int, limit: int, prefix: str) -> list[tuple[str, int]]:
        with self._lock:
            now = self.clock()
            # list(): _live() drops expired rows from _due while we look
            due = sorted(
                (d, k)
                for k, d in list(self._due.items())
                if d <= until and k.startswith(prefix) and self._live(k, now)
            )
        return [(k, d) for d, k in due[:limit]]

    def dead_letters(self, *, limit: int = 100) -> list[tuple[str, int]]:
        validate_limit(limit)
        with self._lock:
            return sorted(self._dead.items(), key=lambda kv: (kv[1], kv[0]))[:limit]

    def park(self, key: str, *, reason: str) -> bool:
        """Dead-letter a record that cannot be read (see ``StateStore.park``)."""
        validate_key(key)
        validate_text(reason, "reason")
        with self._lock:
            now = self.clock()
            if key not in self._rows:
                return False
            self._parked[key] = reason[:500]
            self._due.pop(key, None)
            self._dead.setdefault(key, now)
            return True

    def dead_letter_reasons(self, keys: Sequence[str]) -> dict[str, str]:
        """Key -> why it is dead-lettered: the park reason, else the errors
        of its dead timers ('' when it is not dead-lettered)."""
        if isinstance(keys, str):
            raise InvalidConfigError("keys must be a list of keys, not a str", path="keys")
        found: dict[str, str] = {}
        with self._lock:
            for key in keys:
                row = self._rows.get(validate_key(key))
                reason = self._parked.get(key, "")
                if not reason and row is not None:
                    reason = "; ".join(f"{k}: {f.error}" for k, f in row.failures.items() if f.dead)
                found[key] = reason
        return found

    def persists_data(self) -> bool | None:
        """False: a MemoryStore loses everything with its process."""
        return False

    def machine_ids(self, keys: Sequence[str]) -> dict[str, str]:
        if isinstance(keys, str):
            raise InvalidConfigError("keys must be a list of keys, not a str", path="keys")
        found: dict[str, str] = {}
        with self._lock:
            now = self.clock()
            for key in keys:
                row = self._live(validate_key(key), now)
                found[key] = "" if row is None else row.machine_id
                if row is not None and not row.machine_id:  # as on Redis: the snapshot's
                    found[key] = self._record(key, row).owner
        return found

    def health(self) -> dict[str, Any]:
        with self._lock:
            return {"ok": True, "backend": "memory", "instances": len(self._rows)}

    def clear(self) -> None:
        """Drop everything (for tests)."""
        with self._lock:
            self._rows.clear()
            self._floors.clear()
            self._locks.clear()
            self._unlocked.notify_all()
            self._due.clear()
            self._dead.clear()
            self._parked.clear()
