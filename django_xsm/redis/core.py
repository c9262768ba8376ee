"""The Redis backends' logic, once, as generators of I/O requests.

Each operation is a generator that yields what it needs from Redis (a
:class:`~django_xsm.redis.ops.Call` to a script, a :class:`Cmd`, or a
:class:`Many` to pipeline) and receives the reply; its return value is the
result. ``RedisStore`` drives these generators with a blocking client and
``AsyncRedisStore`` with ``redis.asyncio`` — the twins share every line of
logic and only differ in how a request is sent.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias, TypeVar

import redis.exceptions as rex

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence import records
from django_xsm.persistence.base import (
    Codec,
    validate_key,
    validate_limit,
    validate_positive_int,
    validate_text,
    validate_ttl_s,
)
from django_xsm.persistence.codecs import JsonCodec, encode_snapshot
from django_xsm.persistence.runner import Apply
from django_xsm.persistence.unshared import unshared_writes

from . import ops
from .durability import Durability, Replicated
from .keys import LAYOUT_VERSION, SEP, KeyLayout
from .namespace import UPGRADABLE, LayoutState, config_value, parse_schema, upgrade_call
from .ops import Call, Cmd, b2s

__all__ = ["Cmd", "LayoutState", "Many", "Op", "Request", "StoreCore", "parse_schema", "ttl_ms_of"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Many:
    """Several requests sent in one pipeline (one round trip)."""

    requests: tuple[Call | Cmd, ...]


#: What a core generator yields: a script call, a command, a pipeline, a
#: replicated write, or a method of another backend (an inbox or log that
#: does not share the store's commit).
Request: TypeAlias = Call | Cmd | Many | Replicated | Apply
Op: TypeAlias = Generator[Request, Any, T]


class StoreCore:
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

    # --- records -----------------------------------------------------------

    def load(self, key: str) -> Op[records.StoredRecord | None]:
        # OPEN without a lock or claims writes nothing and checks the size
        # before sending the snapshot's bytes.
        result = yield from self.open(records.OpenRequest(key))
        return result.record

    def open(self, request: records.OpenRequest) -> Op[records.OpenResult]:
        validate_key(request.key)
        if request.lock_token:
            ops.check_ttl(request.lock_ttl_ms, "lock_ttl_ms")
        for claim in request.claims:  # before any I/O (the marker included)
            ops.same_instance(request.key, claim)
        layout = yield from self.state.ensure()
        limit = self.max_snapshot_bytes
        reply = yield ops.open_call(layout, request, limit)
        result = ops.parse_open(request, reply, self.codec, limit)
        if self.durability and any(c.status == records.ClaimStatus.DONE for c in result.claims):
            # A replay acknowledges the commit it replays: prove that commit
            # is on enough replicas first (it may have been refused as not
            # durable when it ran).
            yield from self.durability.confirm(layout, request.key)
        return result

    def encode(self, unit: records.CommitUnit) -> bytes | None:
        """The snapshot bytes ``unit`` stores (see ``encode_snapshot``)."""
        return encode_snapshot(self.codec, unit, self.max_snapshot_bytes)

    def commit(
        self, unit: records.CommitUnit, *, inbox: Any, log: Any, shares: Callable[[object], bool]
    ) -> Op[records.CommitResult]:
        """One COMMIT script for the snapshot and whatever ``shares`` says
        commits with it; an inbox or log that does not share is written
        afterwards (snapshot, marks, log: the documented order)."""
        with_inbox = inbox is None or shares(inbox)
        with_log = log is None or shares(log)
        maxlen = int(getattr(log, "maxlen", None) or 0) if with_log else 0
        result = yield from self._commit(
            unit, with_inbox=with_inbox, with_log=with_log, log_maxlen=maxlen
        )
        if result.replayed:
            return result
        first_seq = yield from unshared_writes(
            unit,
            result.version,
            inbox=None if with_inbox else inbox,
            log=None if with_log else log,
        )
        return replace(result, first_seq=first_seq) if first_seq else result

    def _commit(
        self, unit: records.CommitUnit, *, with_inbox: bool, with_log: bool, log_maxlen: int
    ) -> Op[records.CommitResult]:
        validate_key(unit.key)
        records.check_commit_id(unit.commit_id)
        data = self.encode(unit)  # raises before any I/O
        for claim in (*(m.claim for m in unit.marks), *(r.claim for r in unit.releases)):
            ops.same_instance(unit.key, claim)
        layout = yield from self.state.ensure()
        call = ops.commit_call(
            layout,
            unit,
            data,
            ttl_ms=self.ttl_ms,
            log_maxlen=log_maxlen,
            with_inbox=with_inbox,
            with_log=with_log,
        )
        if not self.durability:
            return ops.parse_commit(unit, (yield call))
        reply, acked = yield self.durability.around(call)
        result = ops.parse_commit(unit, reply)  # a refused commit wrote nothing
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
        result = yield from self._commit(unit, with_inbox=False, with_log=False, log_maxlen=0)
        return result.version

    # --- locks ----------------------------------------------------------------

    def acquire_lock(self, key: str, token: str, ttl_ms: int) -> Op[int]:
        validate_key(key)
        ops.check_ttl(ttl_ms, "ttl_ms")
        layout = yield from self.state.ensure()
        return int((yield Call("ACQUIRE_LOCK", [layout.lock(key)], [token, ttl_ms])))

    def release_lock(self, key: str, token: str) -> Op[bool]:
        validate_key(key)
        validate_text(token, "token")
        layout = yield from self.state.ensure()
        return bool(int((yield Call("RELEASE_LOCK", [layout.lock(key)], [token]))))

    def lock_holder(self, key: str) -> Op[str | None]:
        validate_key(key)
        layout = yield from self.state.ensure()
        raw = yield Cmd("GET", (layout.lock(key),))
        return None if raw is None else b2s(raw)

    # --- removal ----------------------------------------------------------------

    def delete(self, key: str) -> Op[bool]:
        validate_key(key)
        layout = yield from self.state.ensure()
        b = layout.bucket(key)
        keys = [layout.snapshot(key), layout.floors(b), *layout.index_keys(b)]
        return bool(int((yield Call("DELETE", keys, [key]))))

    def forget(self, key: str) -> Op[dict[str, int]]:
        validate_key(key)
        layout = yield from self.state.ensure()
        b = layout.bucket(key)
        keys = [
            layout.snapshot(key),
            layout.floors(b),
            *layout.index_keys(b),
            layout.lock(key),
            layout.log(key),
            layout.log_index(b),
        ]
        snap, due, lock, logged = yield Call("FORGET", keys, [key])
        return {
            "snapshot": int(snap),
            "deadlines": int(due),
            "lock": int(lock),
            "log": int(logged),
        }

    # --- listing and timers ---------------------------------------------------------

    def list_page(
        self, prefix: str, after: str, limit: int, machine: str | None, state: str | None
    ) -> Op[tuple[list[str], str]]:
        # StoreKeywords.list_page checked the arguments.
        layout = yield from self.state.ensure()
        if state is not None:
            index, head = 4, state + SEP
        elif machine is not None:
            index, head = 3, machine + SEP
        else:
            index, head = 2, ""
        base = (head + prefix).encode()
        if after and after >= prefix:
            lo = b"(" + (head + after).encode()
        else:
            lo = b"[" + base
        hi = b"[" + base + b"\xff"
        calls = tuple(
            Call(
                "LIST_PAGE",
                layout.prune_keys(b),
                [
                    index,
                    lo,
                    hi,
                    limit + 1,  # one more than a page: is there a next page?
                    len(head.encode()),
                    layout.snapshot_prefix(b),
                    layout.log_prefix(b),
                    "1" if state is not None and machine is not None else "0",
                    machine or "",
                ],
            )
            for b in range(layout.buckets)
        )
        replies = yield Many(calls)
        # a state filter's page comes in two sorted runs (see LIST_PAGE)
        pages = [sorted({b2s(k) for k in r}) for r in replies]
        merged = list(heapq.merge(*pages))
        page = merged[:limit]
        # Each bucket gave up to limit + 1 of its keys after the cursor, so more
        # than `limit` keys remain exactly when more than `limit` came back.
        more = len(merged) > limit
        return page, (page[-1] if more else "")

    def due_keys(self, until: int, limit: int, prefix: str) -> Op[list[tuple[str, int]]]:
        # StoreKeywords.due_keys checked the arguments.
        layout = yield from self.state.ensure()
        calls = tuple(
            Call(
                "DUE",
                layout.prune_keys(b),
                [until, limit, layout.snapshot_prefix(b), layout.log_prefix(b), prefix],
            )
            for b in range(layout.buckets)
        )
        replies = yield Many(calls)
        rows = [(int(float(r[i + 1])), b2s(r[i])) for r in replies for i in range(0, len(r), 2)]
        rows.sort()
        return [(k, d) for d, k in rows[:limit]]

    def record_timer_failure(
        self,
        key: str,
        expected_version: int,
        failures: Mapping[str, records.TimerFailure],
        next_due_ms: int | None,
    ) -> Op[bool]:
        validate_key(key)
        layout = yield from self.state.ensure()
        b = layout.bucket(key)
        payload = ops._dumps({k: f.to_dict() for k, f in failures.items()}) if failures else ""
        reply = yield Call(
            "RECORD_TIMER_FAILURE",
            [layout.snapshot(key), layout.due(b), layout.dead(b)],
            [
                key,
                expected_version,
                payload,
                "" if next_due_ms is None else next_due_ms,
                "1" if any(f.dead for f in failures.values()) else "0",
            ],
        )
        return bool(int(reply))

    def dead_letters(self, limit: int) -> Op[list[tuple[str, int]]]:
        validate_limit(limit)
        layout = yield from self.state.ensure()
        cmds = tuple(
            Cmd("ZRANGE", (layout.dead(b), 0, limit - 1, "WITHSCORES"))
            for b in range(layout.buckets)
        )
        replies = yield Many(cmds)
        rows = sorted((int(float(s)), b2s(m)) for r in replies for m, s in ops.score_pairs(r))
        return [(k, t) for t, k in rows[:limit]]

    def park(self, key: str, reason: str) -> Op[bool]:
        validate_key(key)
        validate_text(reason, "reason")
        layout = yield from self.state.ensure()
        b = layout.bucket(key)
        reply = yield Call(
            "PARK", [layout.snapshot(key), layout.due(b), layout.dead(b)], [key, reason[:500]]
        )
        return bool(int(reply))

    def dead_letter_reasons(self, keys: Sequence[str]) -> Op[dict[str, str]]:
        wanted = _wanted_keys(keys)
        if not wanted:
            return {}
        layout = yield from self.state.ensure()
        rows = yield Many(tuple(Cmd("HMGET", (layout.snapshot(k), "park", "tf")) for k in wanted))
        return {k: _reason(park, tf) for k, (park, tf) in zip(wanted, rows, strict=True)}

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

    def persists_data(self) -> Op[bool | None]:
        try:
            aof = yield Cmd("CONFIG GET", ("appendonly",))
            save = yield Cmd("CONFIG GET", ("save",))
        except rex.ResponseError:  # CONFIG renamed away or not allowed by the ACL
            return None
        return config_value(aof, "appendonly") == "yes" or bool(config_value(save, "save"))

    def machine_ids(self, keys: Sequence[str]) -> Op[dict[str, str]]:
        wanted = _wanted_keys(keys)
        if not wanted:
            return {}
        layout = yield from self.state.ensure()
        raw = yield Many(tuple(Cmd("HGET", (layout.snapshot(k), "m")) for k in wanted))
        found = {k: b2s(r) for k, r in zip(wanted, raw, strict=True)}
        # A record committed with an empty machine id names it in its snapshot.
        blank = [k for k, r in zip(wanted, raw, strict=True) if r is not None and not b2s(r)]
        if blank:
            rows = yield Many(tuple(Cmd("HGETALL", (layout.snapshot(k),)) for k in blank))
            for k, fields in zip(blank, rows, strict=True):
                record = ops.parse_record(k, fields, self.codec, self.max_snapshot_bytes)
                if record is not None:
                    found[k] = record.owner
        return found

    def prune_expired(self, limit: int) -> Op[int]:
        validate_limit(limit)
        layout = yield from self.state.ensure()
        calls = tuple(
            Call(
                "PRUNE_EXPIRED",
                layout.prune_keys(b),
                [limit, layout.snapshot_prefix(b), layout.log_prefix(b)],
            )
            for b in range(layout.buckets)
        )
        replies = yield Many(calls)
        return sum(int(r) for r in replies)

    def health(self) -> Op[dict[str, Any]]:
        # The schema marker is read on every check: a marker recreated with
        # another namespace id means Redis lost the namespace (reported as
        # namespace_reset). A small expiring write rather than PING: a
        # read-only replica (READONLY) or a full server (OOM) still answers
        # PING but cannot take a commit, and readiness must say so.
        write = Cmd("SET", (KeyLayout.health_key_for(self.state.prefix), "1", "PX", 10_000))
        schema, _ = yield Many((self.state.schema_call(), write))
        layout = self.state.seen(schema)
        if self.per_bucket_health:
            # Each bucket is one hash slot: a write to each proves that every
            # slot owner holding this namespace is reachable and writable.
            yield Many(
                tuple(
                    Cmd("SET", (layout.bucket_health(b), "1", "PX", 10_000))
                    for b in range(layout.buckets)
                )
            )
        info: dict[str, Any] = {
            "ok": True,
            "backend": "redis",
            "layout": LAYOUT_VERSION,
            "buckets": layout.buckets,
        }
        if self.state.reset:
            info["namespace_reset"] = True
        return info


def ttl_ms_of(ttl_s: object) -> int:
    """``ttl_s`` as the milliseconds COMMIT takes (0: no expiry)."""
    checked = validate_ttl_s(ttl_s)
    return 0 if checked is None else int(checked * 1000)


def _reason(park: Any, tf: Any) -> str:
    """Why a key is dead-lettered: the park reason, else its dead timers' errors."""
    if park:
        return b2s(park)
    try:
        failures = json.loads(tf) if tf else {}
        return "; ".join(f"{k}: {f.get('error', '')}" for k, f in failures.items() if f.get("dead"))
    except (ValueError, TypeError, AttributeError, RecursionError):
        return "timer bookkeeping is damaged"


def _wanted_keys(keys: Sequence[str]) -> list[str]:
    """A batch of instance keys, each checked (a lone str is a mistake)."""
    if isinstance(keys, str):
        raise InvalidConfigError("keys must be a list of keys, not a str", path="keys")
    return [validate_key(k) for k in keys]
