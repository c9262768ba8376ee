"""Script calls and reply parsing, shared by the sync and async backends.

Each operation is a pair: a builder that returns a :class:`Call` (script
name, KEYS, ARGV) and a parser that turns the raw reply into records or
errors. The sync and async classes only differ in how they run a Call,
which is what keeps them twins rather than copies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import (
    ConflictError,
    InvalidConfigError,
    SnapshotCorruptError,
    SnapshotTooLargeError,
)
from django_xsm.persistence import records
from django_xsm.persistence.arguments import validate_key
from django_xsm.persistence.base import Codec
from django_xsm.persistence.codecs import dumps_text, loads_tagged
from django_xsm.persistence.sealing import UnsealError, seal, unseal

from .keys import KeyLayout

__all__ = [
    "Call",
    "Cmd",
    "b2s",
    "check_ttl",
    "claim_call",
    "commit_call",
    "open_call",
    "parse_claim",
    "parse_commit",
    "parse_open",
    "parse_record",
    "parse_stream_rows",
    "score_pairs",
    "stream_fields",
    "time_ms",
]


@dataclass(frozen=True, slots=True)
class Call:
    """One script of :mod:`django_xsm.redis.scripts` (by name), its KEYS and ARGV."""

    script: str
    keys: list[str]
    args: list[Any]


@dataclass(frozen=True, slots=True)
class Cmd:
    """A plain Redis command (``name`` as in ``client.execute_command``)."""

    name: str
    args: tuple[Any, ...]


def b2s(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return "" if value is None else str(value)


def _dumps(value: Any, path: str = "$") -> str:
    # dumps_text refuses lone surrogates by path (redis-py would raise
    # UnicodeEncodeError while packing the command).
    return dumps_text(value, path).decode()


def stream_fields(raw: Any) -> dict[bytes, Any]:
    """A stream entry's or hash's fields: redis-py's dict or a flat list (the
    last value of a repeated field wins)."""
    pairs = raw.items() if isinstance(raw, Mapping) else zip(raw[::2], raw[1::2], strict=False)
    return {k if isinstance(k, bytes) else str(k).encode(): v for k, v in pairs}


def score_pairs(reply: Sequence[Any]) -> list[tuple[Any, Any]]:
    """(member, score) pairs from a WITHSCORES or ZSCAN reply, flat or already
    paired (redis-py pairs them through its response callbacks, Lua replies
    don't)."""
    if reply and isinstance(reply[0], list | tuple):
        return [(m, s) for m, s in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


def time_ms(reply: Sequence[Any]) -> int:
    """A ``TIME`` reply (seconds, microseconds) as epoch ms."""
    return int(reply[0]) * 1000 + int(reply[1]) // 1000


def check_ttl(value: Any, name: str) -> None:
    # SET ... PX 0 is an error reply, and OPEN would raise it after writing
    # its claims: refuse before any I/O instead.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(
            f"{name} must be a positive number of milliseconds, got {brief(value)}", path=name
        )


# --- records -------------------------------------------------------------------


def join_long(h: Mapping[bytes, Any], name: bytes) -> bytes | None:
    """The value of field ``name`` of a snapshot hash read whole (HGETALL):
    the field itself, or its parts ``<name>1..<name>n`` (layout 2, see
    ``PRELUDE_LONG``); ``None`` when it is missing or a part is."""
    whole = h.get(name)
    if whole is not None:
        return whole if isinstance(whole, bytes) else str(whole).encode()
    try:
        n = int(h[name + b"n"])
    except (KeyError, ValueError, TypeError):
        return None
    parts = [h.get(name + str(i).encode()) for i in range(1, n + 1)]
    if n < 1 or any(p is None for p in parts):
        return None
    return b"".join(p if isinstance(p, bytes) else str(p).encode() for p in parts)


def parse_record(
    key: str,
    fields: Mapping[bytes, Any] | Sequence[Any],
    codec: Codec,
    limit: int | None = None,
) -> records.StoredRecord | None:
    """A StoredRecord from the snapshot hash (HGETALL as dict or flat list).
    A snapshot over ``limit`` bytes raises ``SnapshotTooLargeError`` before
    it is decoded."""
    h = fields if isinstance(fields, Mapping) else stream_fields(fields)
    if not h:
        return None
    try:
        data = join_long(h, b"d")
        if data is None:
            raise KeyError("d")
        version = int(h[b"v"])
        updated = int(h.get(b"u") or 0)
        if not 0 <= version < records.MAX_VERSION or not 0 <= updated <= records.MAX_EPOCH_MS:
            raise ValueError(version, updated)
    except (KeyError, ValueError, TypeError):
        raise SnapshotCorruptError(
            f"Stored record of {key!r} is damaged (missing or invalid d/v/u field)",
            key=key,
        ) from None
    data_bytes = data if isinstance(data, bytes) else str(data).encode()
    if limit is not None and len(data_bytes) > limit:
        raise SnapshotTooLargeError(key, size=len(data_bytes), limit=limit, stored=True)
    snapshot = codec.decode(data_bytes, key=key, version=version)
    failures: dict[str, records.TimerFailure] = {}
    raw_tf = h.get(b"tf")
    if raw_tf:
        try:
            failures = {k: records.TimerFailure.from_dict(v) for k, v in json.loads(raw_tf).items()}
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            raise SnapshotCorruptError(
                f"Timer bookkeeping of {key!r} is damaged", key=key
            ) from None
    return records.StoredRecord(
        key=key,
        snapshot=snapshot,
        version=version,
        machine_version=b2s(h.get(b"mv")),
        updated_ms=updated,
        machine_id=b2s(h.get(b"m")),
        timer_failures=failures,
    )


# --- open ------------------------------------------------------------------------


def same_instance(key: str, claim: records.ClaimRequest) -> records.ClaimRequest:
    """``claim`` if it is for instance ``key``: rows live in the instance's
    hash slot, so an open or a commit carries claims of its own key only."""
    if claim.instance_key != key:
        raise InvalidConfigError(
            f"A claim for {claim.instance_key!r} cannot open or commit with {key!r}",
            path="claims",
            hint="claim through the inbox of that instance instead",
        )
    return checked_claim(claim)


def checked_claim(claim: records.ClaimRequest) -> records.ClaimRequest:
    """``claim`` if its names are usable: the row field is ``instance key
    NUL idempotency key``, so neither may hold control characters."""
    validate_key(claim.instance_key)
    validate_key(claim.idempotency_key, what="idempotency key")
    if claim.scope != "":  # the empty scope (no principal) is allowed
        validate_key(claim.scope, what="scope")
    return claim


def claim_args(layout: KeyLayout, claim: records.ClaimRequest) -> tuple[list[str], list[Any]]:
    """A claim's KEYS (inbox hash, inbox expiry) and ARGV (field, fingerprint, owner, lease ms)."""
    bucket = layout.bucket(claim.instance_key)
    keys = [layout.inbox(claim.scope, claim.instance_key), layout.inbox_expiry(bucket)]
    args = [
        layout.inbox_field(claim.instance_key, claim.idempotency_key),
        claim.fingerprint,
        claim.owner,
        claim.lease_ms,
    ]
    return keys, args


def open_call(layout: KeyLayout, request: records.OpenRequest, limit: int) -> Call:
    """The OPEN call; a stored snapshot over ``limit`` bytes comes back as
    its size, never as its bytes. The caller checked the claims
    (:func:`same_instance`)."""
    key = request.key
    keys = [
        layout.snapshot(key),
        layout.lock(key),
        layout.floors(layout.bucket(key)),
        layout.lock_waiters(key),
    ]
    args: list[Any] = [key, request.lock_token, request.lock_ttl_ms, len(request.claims), limit]
    for claim in request.claims:
        ck, ca = claim_args(layout, claim)
        keys += ck
        args += ca
    return Call("OPEN", keys, args)


def parse_claim(
    claim: records.ClaimRequest, reply: Sequence[Any], codec: Codec | None = None
) -> records.ClaimOutcome:
    status, receipt, retry = b2s(reply[0]), reply[1], int(reply[2] or 0)
    stored: Any = None
    if status == "done" and receipt:
        try:
            stored = loads_tagged(unseal(codec, receipt))
        except ValueError:
            stored = None
    return records.ClaimOutcome(status, claim, receipt=stored, retry_after_ms=retry)


#: The snapshot hash fields OPEN reads (HMGET order).
RECORD_FIELDS = (b"d", b"v", b"mv", b"m", b"u", b"tf")


def parse_open(
    request: records.OpenRequest, reply: Sequence[Any], codec: Codec, limit: int
) -> records.OpenResult:
    busy, floor, claims, _values, locked, exists, size = reply[:7]
    if int(busy):
        return records.OpenResult(record=None, lock_busy_ms=int(busy))
    if int(size):
        # OPEN took nothing for us (no lock, no claim) and sent no bytes
        raise SnapshotTooLargeError(request.key, size=int(size), limit=limit, stored=True)
    fields = {n: v for n, v in zip(RECORD_FIELDS, reply[3], strict=True) if v is not None}
    if int(exists) and not fields:
        # a hash holding none of a record's fields: damaged, not absent
        fields = {b"?": b""}
    return records.OpenResult(
        record=parse_record(request.key, fields, codec, limit),
        floor=int(floor),
        locked=bool(int(locked)),
        claims=tuple(parse_claim(r, c, codec) for r, c in zip(request.claims, claims, strict=True)),
        lock_held_ms=int(reply[7]) if len(reply) > 7 else 0,
    )


def claim_call(layout: KeyLayout, claim: records.ClaimRequest) -> Call:
    return Call("CLAIM", *claim_args(layout, claim))


# --- commit ----------------------------------------------------------------------


def entry_args(entry: records.LogEntry, codec: Codec | None = None) -> list[Any]:
    # payload, actor and reason hold user data: sealed when the codec can
    return [
        entry.event_type,
        seal(codec, _dumps(entry.payload, "$.payload")),
        seal(codec, entry.actor),
        seal(codec, entry.reason),
        _dumps(entry.from_state),
        _dumps(entry.to_state),
        entry.idempotency_key,
        entry.correlation_id,
        entry.timestamp_ms,
        "1" if entry.accepted else "0",
    ]


def commit_call(
    layout: KeyLayout,
    unit: records.CommitUnit,
    data: bytes | None,
    *,
    ttl_ms: int,
    log_maxlen: int,
    codec: Codec | None = None,
) -> Call:
    """The COMMIT call: the unit whole (snapshot, marks, releases, log
    entries, outbox events) in one script. Receipts, log payloads and
    emitted events are sealed by ``codec`` when it can
    (django_xsm.persistence.sealing). The caller checked the claims of
    the marks and releases (:func:`same_instance`)."""
    key = unit.key
    b = layout.bucket(key)
    keys = [
        layout.snapshot(key),
        layout.lock(key),
        layout.floors(b),
        *layout.index_keys(b),
        layout.log(key),
        layout.log_index(b),
        layout.inbox_expiry(b),
        layout.outbox(b),
        layout.lock_waiters(key),
        layout.lock_wake(key),
    ]
    inbox_slot: dict[str, int] = {}

    def slot(scope: str) -> int:
        name = layout.inbox(scope, key)
        if name not in inbox_slot:
            keys.append(name)
            inbox_slot[name] = len(keys)  # KEYS is 1-based in Lua
        return inbox_slot[name]

    marks, releases, entries = unit.marks, unit.releases, unit.log_entries
    failures = unit.timer_failures
    header: list[Any] = [
        key,
        unit.commit_id,
        unit.expected_version,
        unit.floor,
        unit.lock_token,
        1 if unit.release_lock else 0,
        1 if data is not None else 0,
        unit.machine_id,
        unit.machine_version,
        list(unit.state_ids),
        "" if unit.next_due_ms is None else unit.next_due_ms,
        "-"
        if failures is None
        else (_dumps({k: f.to_dict() for k, f in failures.items()}) if failures else ""),
        1 if failures and any(f.dead for f in failures.values()) else 0,
        ttl_ms,
        log_maxlen,
        [
            [
                slot(m.claim.scope),
                layout.inbox_field(key, m.claim.idempotency_key),
                m.claim.fingerprint,
                m.claim.owner,
                seal(codec, _dumps(m.receipt, "$.receipt")),
                m.ttl_ms,
            ]
            for m in marks
        ],
        [
            [slot(r.claim.scope), layout.inbox_field(key, r.claim.idempotency_key), r.claim.owner]
            for r in releases
        ],
        [entry_args(entry, codec) for entry in entries],
        [[e.delivery_id, seal(codec, _dumps(dict(e.event), "$.emitted"))] for e in unit.emitted],
    ]
    # Two arguments: the snapshot bytes (possibly binary: Fernet) and one
    # JSON document for the rest, which redis-py packs far cheaper than
    # dozens of separate arguments.
    args: list[Any] = [data if data is not None else b"", dumps_text(header, "commit")]
    return Call("COMMIT", keys, args)


def parse_commit(unit: records.CommitUnit, reply: Sequence[Any]) -> records.CommitResult:
    status = b2s(reply[0])
    if status == "ok":
        return records.CommitResult(
            version=int(reply[1]), first_seq=int(reply[2]), updated_ms=int(reply[3])
        )
    if status == "dup":
        return records.CommitResult(
            version=int(reply[1]), updated_ms=int(reply[3] or 0), replayed=True
        )
    if status == "corrupt":
        raise SnapshotCorruptError(
            f"Stored record of {unit.key!r} is damaged (unreadable version field)",
            key=unit.key,
        )
    actual_raw = int(reply[1])
    actual = None if actual_raw < 0 else actual_raw
    reason = {"conflict": "version", "lock": "lock", "claim": "claim"}.get(status, status)
    raise ConflictError(
        unit.key,
        expected=unit.expected_version,
        actual=actual,
        reason=reason,
        held_lock=bool(unit.lock_token),
    )


# --- log ---------------------------------------------------------------------------


def _loads(raw: Any) -> Any:
    try:
        return loads_tagged(raw) if raw not in (None, b"", "") else None
    except ValueError:
        return b2s(raw)


def parse_stream_rows(
    key: str, rows: Sequence[Any], codec: Codec | None = None
) -> list[records.TransitionRecord]:
    """Log records from XRANGE rows; sealed fields opened with ``codec``
    (clear ones, written before it, read as they are). A sealed field no
    key opens is a ``SnapshotCorruptError`` with ``encrypted=True`` (the
    keys to configure), a malformed one a damaged entry."""
    out = []
    for entry_id, fields in rows:
        f = stream_fields(fields)
        try:
            seq = int(b2s(entry_id).split("-", 1)[0])
            out.append(
                records.TransitionRecord(
                    key=key,
                    seq=seq,
                    version=int(f.get(b"v") or 0),
                    event_type=b2s(f.get(b"e")),
                    payload=_loads(unseal(codec, f.get(b"p"))) or {},
                    actor=unseal(codec, f.get(b"a")),
                    reason=unseal(codec, f.get(b"r")),
                    from_state=_loads(f.get(b"f")),
                    to_state=_loads(f.get(b"t")),
                    idempotency_key=b2s(f.get(b"k")),
                    correlation_id=b2s(f.get(b"c")),
                    timestamp_ms=int(f.get(b"ts") or 0),
                    accepted=b2s(f.get(b"ok")) != "0",
                )
            )
        except UnsealError as exc:
            raise SnapshotCorruptError(
                f"Transition log of {key!r}: entry {b2s(entry_id)!r} holds {exc}",
                key=key,
                encrypted=True,
            ) from None
        except (ValueError, TypeError):
            raise SnapshotCorruptError(
                f"Transition log of {key!r} has a damaged entry {b2s(entry_id)!r}", key=key
            ) from None
    return out
