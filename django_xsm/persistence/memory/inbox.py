"""MemoryInbox: the reference idempotency inbox (see ``base.InboxStore``)."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django_xsm.exceptions import ConflictError
from django_xsm.persistence.base import system_clock_ms, validate_key, validate_limit
from django_xsm.persistence.codecs import dumps_text, loads_tagged
from django_xsm.persistence.records import (
    ClaimOutcome,
    ClaimRequest,
    ClaimStatus,
    InboxMark,
    InboxRelease,
)

__all__ = ["MemoryInbox"]

_RowId = tuple[str, str, str]  # scope, instance key, idempotency key


@dataclass(slots=True)
class _InboxRow:
    fingerprint: str
    owner: str
    done: bool
    expires_ms: int  # lease end while in flight, retention end when done
    receipt: Any = None


def _row_id(claim: ClaimRequest) -> _RowId:
    return (claim.scope, claim.instance_key, claim.idempotency_key)


class MemoryInbox:
    """Thread-safe in-process :class:`~django_xsm.persistence.base.InboxStore`."""

    def __init__(self, *, clock: Callable[[], int] | None = None) -> None:
        self.clock = clock or system_clock_ms
        self._lock = threading.RLock()
        self._rows: dict[_RowId, _InboxRow] = {}
        # (expires_ms, row id); entries whose row changed are skipped lazily,
        # so purging costs the number of expired entries.
        self._expiry: list[tuple[int, _RowId]] = []

    def _live(self, rid: _RowId, now: int) -> _InboxRow | None:
        row = self._rows.get(rid)
        if row is not None and row.expires_ms <= now:
            del self._rows[rid]
            return None
        return row

    def _outcome(self, request: ClaimRequest, now: int) -> ClaimOutcome:
        row = self._live(_row_id(request), now)
        if row is None:
            return ClaimOutcome(ClaimStatus.CLAIMED, request)
        if row.fingerprint != request.fingerprint:
            return ClaimOutcome(ClaimStatus.MISMATCH, request)
        if row.done:
            return ClaimOutcome(ClaimStatus.DONE, request, receipt=row.receipt)
        if row.owner == request.owner:
            return ClaimOutcome(ClaimStatus.CLAIMED, request)
        return ClaimOutcome(ClaimStatus.IN_FLIGHT, request, retry_after_ms=row.expires_ms - now)

    def _put(self, rid: _RowId, row: _InboxRow) -> None:
        self._rows[rid] = row
        heapq.heappush(self._expiry, (row.expires_ms, rid))

    def claim_all(self, requests: Iterable[ClaimRequest]) -> tuple[ClaimOutcome, ...]:
        """Claim every request or none: leases are written only when all
        outcomes are CLAIMED."""
        with self._lock:
            now = self.clock()
            outcomes = tuple(self._outcome(r, now) for r in requests)
            if all(o.status == ClaimStatus.CLAIMED for o in outcomes):
                for o in outcomes:
                    r = o.request
                    self._put(
                        _row_id(r),
                        _InboxRow(r.fingerprint, r.owner, False, now + r.lease_ms),
                    )
            return outcomes

    def claim(self, request: ClaimRequest) -> ClaimOutcome:
        validate_key(request.idempotency_key, what="idempotency key")
        return self.claim_all((request,))[0]

    def check_owned(
        self, claims: Iterable[ClaimRequest], key: str, expected: int, actual: int | None
    ) -> None:
        """Raise ConflictError(reason='claim') unless every claim is still
        the caller's (an expired lease nobody else took still counts).
        ``actual`` is the stored version to report (None: no record)."""
        with self._lock:
            now = self.clock()
            for claim in claims:
                row = self._rows.get(_row_id(claim))
                if row is None or (not row.done and row.owner == claim.owner):
                    continue
                if row.expires_ms <= now:
                    continue
                raise ConflictError(key, expected=expected, actual=actual, reason="claim")

    def mark(self, mark: InboxMark) -> bool:
        with self._lock:
            now = self.clock()
            c = mark.claim
            row = self._live(_row_id(c), now)
            if row is not None and (row.done or row.owner != c.owner):
                return False
            self._put(*self.stage_mark(mark, now))
            return True

    def stage_mark(self, mark: InboxMark, now: int) -> tuple[_RowId, _InboxRow]:
        """The finished row ``mark`` would write, without writing it: the
        receipt is encoded here, so a MemoryStore commit fails before its
        first write on a receipt that is not JSON-ready. Write it with
        :meth:`put_staged`, ownership checked (``check_owned``)."""
        c = mark.claim
        # Keep what Redis would: a private, JSON-decoded copy (tagged
        # values such as Decimal come back as Python values).
        receipt = loads_tagged(dumps_text(mark.receipt, "$.receipt"))
        return _row_id(c), _InboxRow(c.fingerprint, c.owner, True, now + mark.ttl_ms, receipt)

    def put_staged(self, staged: list[tuple[_RowId, _InboxRow]]) -> None:
        for rid, row in staged:
            self._put(rid, row)

    def release(self, release: InboxRelease) -> bool:
        with self._lock:
            rid = _row_id(release.claim)
            row = self._rows.get(rid)
            if row is None or row.done or row.owner != release.claim.owner:
                return False
            del self._rows[rid]
            return True

    def get(self, scope: str, instance_key: str, idempotency_key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._live((scope, instance_key, idempotency_key), self.clock())
            if row is None:
                return None
            return {
                "state": "done" if row.done else "in_flight",
                "fingerprint": row.fingerprint,
                "receipt": row.receipt,
                "expires_ms": row.expires_ms,
            }

    def purge_expired(self, *, limit: int | None = 1000) -> int:
        validate_limit(limit, optional=True)
        removed = 0
        with self._lock:
            now = self.clock()
            while self._expiry and self._expiry[0][0] <= now:
                if limit is not None and removed >= limit:
                    break
                expires, rid = heapq.heappop(self._expiry)
                row = self._rows.get(rid)
                if row is not None and row.expires_ms == expires:
                    del self._rows[rid]
                    removed += 1
        return removed

    def count_expired(self) -> int:
        """Costs the number of rows held (a reference backend's shortcut)."""
        with self._lock:
            now = self.clock()
            return sum(1 for row in self._rows.values() if row.expires_ms <= now)

    def _forget_rows(self, doomed: Callable[[_RowId], bool]) -> int:
        with self._lock:
            rids = [rid for rid in self._rows if doomed(rid)]
            for rid in rids:
                del self._rows[rid]
            return len(rids)

    def forget(self, scope: str) -> int:
        return self._forget_rows(lambda rid: rid[0] == scope)

    def forget_instance(self, instance_key: str) -> int:
        validate_key(instance_key)
        return self._forget_rows(lambda rid: rid[1] == instance_key)

    def count_for_instance(self, instance_key: str) -> int:
        validate_key(instance_key)
        with self._lock:
            return sum(1 for rid in self._rows if rid[1] == instance_key)
