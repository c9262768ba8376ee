"""The Redis backends' logic, once, as generators of I/O requests.

Each operation is a generator that yields what it needs from Redis (a
:class:`~django_xsm.redis.calls.Call` to a script, a :class:`Cmd`, or a
:class:`Many` to pipeline) and receives the reply; its return value is the
result. ``RedisStore`` drives these generators with a blocking client and
``AsyncRedisStore`` with ``redis.asyncio`` — the twins share every line of
logic and only differ in how a request is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.persistence import records
from django_xsm.persistence.arguments import (
    validate_key,
    validate_positive_int,
    validate_seconds,
    validate_text,
    validate_ttl_s,
)
from django_xsm.persistence.base import Codec
from django_xsm.persistence.codecs import JsonCodec, encode_snapshot

from . import calls
from .calls import Call, Cmd, b2s
from .durability import Durability
from .keys import KeyLayout
from .namespace import UPGRADABLE, LayoutState, upgrade_call
from .queries import StoreQueries
from .requests import Many, Op

__all__ = [
    "LOCK_WAIT_SLICE_S",
    "Cmd",
    "LayoutState",
    "Many",
    "Op",
    "StoreCore",
    "ttl_ms_of",
]

#: The longest single BLPOP of a lock waiter (s). A wake-up that never comes
#: (a holder that died and let its lease run out, FORGET) costs a waiter at
#: most this before it tries again; it stays far below LOCK_WAKE_MS, the
#: lifetime of the waiters flag it renews on each try.
LOCK_WAIT_SLICE_S = 0.25


class StoreCore(StoreQueries):
    """What RedisStore and AsyncRedisStore do, minus the sending."""

    def __init__(
        self,
        prefix: str,
        *,
        codec: Codec | None,
        max_snapshot_bytes: int,
        ttl_s: float | None,
        lock_ttl_ms: int,
        buckets: int | None,
        min_replicas: int = 0,
        replica_timeout_ms: int = 100,
    ) -> None:
        self.state = LayoutState(prefix, buckets)
        self.codec: Codec = codec or JsonCodec()
        self.max_snapshot_bytes = validate_positive_int(max_snapshot_bytes, "max_snapshot_bytes")
        self.lock_ttl_ms = validate_positive_int(lock_ttl_ms, "lock_ttl_ms")
        self.ttl_ms = ttl_ms_of(ttl_s)
        self.durability = Durability(min_replicas, replica_timeout_ms)
        #: Set by the store on a Redis Cluster: health() then writes to
        #: every bucket, so every slot owner must be reachable and writable.
        self.per_bucket_health = False
        #: The longest BLPOP of wait_unlocked (s): LOCK_WAIT_SLICE_S, or half
        #: the client's socket timeout when that is shorter.
        self.wait_slice_s = LOCK_WAIT_SLICE_S

    # --- records -----------------------------------------------------------

    def load(self, key: str) -> Op[records.StoredRecord | None]:
        # OPEN without a lock or claims writes nothing and checks the size
        # before sending the snapshot's bytes.
        result = yield from self.open(records.OpenRequest(key))
        return result.record

    def open(self, request: records.OpenRequest) -> Op[records.OpenResult]:
        validate_key(request.key)
        if request.lock_token:
            calls.check_ttl(request.lock_ttl_ms, "lock_ttl_ms")
        for claim in request.claims:  # before any I/O (the marker included)
            calls.same_instance(request.key, claim)
        layout = yield from self.state.ensure()
        limit = self.max_snapshot_bytes
        reply = yield calls.open_call(layout, request, limit)
        result = calls.parse_open(request, reply, self.codec, limit)
        if self.durability and any(c.status == records.ClaimStatus.DONE for c in result.claims):
            # A replay acknowledges the commit it replays: prove that commit
            # is on enough replicas first (it may have been refused as not
            # durable when it ran).
            yield from self.durability.confirm(layout, request.key)
        return result

    def encode(self, unit: records.CommitUnit) -> bytes | None:
        """The snapshot bytes ``unit`` stores (see ``encode_snapshot``)."""
        return encode_snapshot(self.codec, unit, self.max_snapshot_bytes)

    def commit(self, unit: records.CommitUnit, *, log: Any) -> Op[records.CommitResult]:
        """One COMMIT script for the snapshot, the marks and the log
        entries (the caller checked that its inbox and log share it)."""
        maxlen = log.maxlen if log is not None else None
        return (yield from self._commit(unit, log_maxlen=maxlen or 0))

    def _commit(self, unit: records.CommitUnit, *, log_maxlen: int) -> Op[records.CommitResult]:
        validate_key(unit.key)
        records.check_commit_id(unit.commit_id)
        data = self.encode(unit)  # raises before any I/O
        for claim in (*(m.claim for m in unit.marks), *(r.claim for r in unit.releases)):
            calls.same_instance(unit.key, claim)
        layout = yield from self.state.ensure()
        call = calls.commit_call(
            layout, unit, data, ttl_ms=self.ttl_ms, log_maxlen=log_maxlen, codec=self.codec
        )
        if not self.durability:
            return calls.parse_commit(unit, (yield call))
        reply, acked = yield self.durability.around(call)
        result = calls.parse_commit(unit, reply)  # a refused commit wrote nothing
        if result.replayed:
            # A retried commit wrote nothing now: WAIT on this connection
            # proves nothing about the first attempt's write.
            yield from self.durability.confirm(layout, unit.key, version=result.version)
        else:
            self.durability.check(unit.key, acked, result.version)
        return result

    def floor(self, key: str) -> Op[int]:
        layout = yield from self.state.ensure()
        raw = yield Cmd("HGET", (layout.floors(layout.bucket(key)), key))
        return int(raw or 0)

    def save_unit(self, key: str, snapshot: Mapping[str, Any], expected_version: int) -> Op[int]:
        floor = (yield from self.floor(key)) if expected_version == 0 else 0
        unit = records.save_unit(key, snapshot, expected_version=expected_version, floor=floor)
        result = yield from self._commit(unit, log_maxlen=0)
        return result.version

    # --- locks ----------------------------------------------------------------

    def acquire_lock(self, key: str, token: str, ttl_ms: int) -> Op[int]:
        validate_key(key)
        calls.check_ttl(ttl_ms, "ttl_ms")
        layout = yield from self.state.ensure()
        keys = [layout.lock(key), layout.lock_waiters(key)]
        return int((yield Call("ACQUIRE_LOCK", keys, [token, ttl_ms])))

    def release_lock(self, key: str, token: str) -> Op[bool]:
        validate_key(key)
        validate_text(token, "token")
        layout = yield from self.state.ensure()
        return bool(int((yield Call("RELEASE_LOCK", layout.lock_keys(key), [token]))))

    def wait_unlocked(self, key: str, seconds: float) -> Op[bool]:
        """Block on the lock's wake list (BLPOP) for at most ``seconds``
        (and at most ``wait_slice_s``); True when a release woke us."""
        validate_key(key)
        seconds = min(validate_seconds(seconds), self.wait_slice_s)
        if not seconds >= 0.001:  # BLPOP 0 blocks forever (and NaN is no time)
            return False
        layout = yield from self.state.ensure()
        reply = yield Cmd("BLPOP", (layout.lock_wake(key), f"{seconds:.3f}"))
        return reply is not None

    def lock_holder(self, key: str) -> Op[str | None]:
        validate_key(key)
        layout = yield from self.state.ensure()
        raw = yield Cmd("GET", (layout.lock(key),))
        return None if raw is None else b2s(raw)

    # --- removal ----------------------------------------------------------------

    def delete(self, key: str) -> Op[bool]:
        validate_key(key)
        layout = yield from self.state.ensure()
        return bool(int((yield Call("DELETE", _record_keys(layout, key), [key]))))

    def forget(self, key: str) -> Op[dict[str, int]]:
        validate_key(key)
        layout = yield from self.state.ensure()
        b = layout.bucket(key)
        keys = [*_record_keys(layout, key), layout.lock(key), layout.log(key), layout.log_index(b)]
        snap, due, lock, logged = yield Call("FORGET", keys, [key])
        return {
            "snapshot": int(snap),
            "deadlines": int(due),
            "lock": int(lock),
            "log": int(logged),
        }

    # --- layout -------------------------------------------------------------------

    def upgrade_layout(self) -> Op[tuple[int, int]]:
        """Move the namespace's schema marker to this layout, one step at a
        time (every process of an older django-xsm stopped first); returns
        (layout before, layout after). A namespace that does not exist yet is
        left alone: ``(0, 0)``."""
        marker = KeyLayout.schema_key_for(self.state.prefix)
        found = yield Cmd("HGET", (marker, "layout"))
        try:
            before = int(b2s(found)) if found is not None else 0
        except ValueError:
            before = -1
        now = before
        while now in UPGRADABLE:
            reply = yield upgrade_call(self.state.prefix, now)
            now = int(b2s(reply)) if reply is not None else 0
        if now > 0:
            yield from self.state.ensure()  # refuses what it cannot read, clearly
        return before, now


def _record_keys(layout: KeyLayout, key: str) -> list[str]:
    """KEYS of DELETE, and the first of FORGET: snapshot, floors, index keys."""
    b = layout.bucket(key)
    return [layout.snapshot(key), layout.floors(b), *layout.index_keys(b)]


def ttl_ms_of(ttl_s: object) -> int:
    """``ttl_s`` as the milliseconds COMMIT takes (0: no expiry)."""
    checked = validate_ttl_s(ttl_s)
    return 0 if checked is None else int(checked * 1000)
