"""What the outbox streams hold and how the outbox reads them: leases,
dead letters, entry parsing, the per-bucket budget of a ``take()`` and the
KEYS of each outbox script (the operations are in :mod:`.outbox`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.base import Codec
from django_xsm.persistence.codecs import loads_tagged
from django_xsm.persistence.outbox import DeadLetter, FailOutcome, OutboxEntry, OutboxLease
from django_xsm.persistence.sealing import UnsealError, is_sealed, unseal, unseal_bytes

from .calls import Call, b2s, stream_fields
from .core import Many
from .keys import KeyLayout

__all__ = [
    "MAX_ERROR",
    "PAGE",
    "RECLAIM_CALLS",
    "REDRIVE_SCAN",
    "STREAM_ID",
    "DeadLetter",
    "FailOutcome",
    "OutboxLease",
    "allocate",
    "bucket_call",
    "bucket_calls",
    "check_ms",
    "id_key",
    "key_of",
    "lenient_entry",
    "parse_entry",
    "stream_rows",
    "waiting_fields",
]

#: Longest error text ``fail()`` stores (characters).
MAX_ERROR = 2000
#: Entries a listing or maintenance script reads per bucket and round trip.
PAGE = 500
#: Dead letters ``redrive()`` reads per bucket looking for a delivery id.
REDRIVE_SCAN = 100_000
#: XAUTOCLAIM calls per bucket in one ``take()``.
RECLAIM_CALLS = 4

STREAM_ID = re.compile(r"[0-9]+-[0-9]+")


# --- entries ----------------------------------------------------------------------


def _number(f: Mapping[bytes, Any], name: str, default: int | None = None) -> int:
    raw = b2s(f.get(name.encode()))
    if raw.isascii() and raw.isdigit():
        return int(raw)
    if raw or default is None:
        raise ValueError(f"{name} is missing or not a number >= 0")
    return default


def parse_entry(raw: Any, codec: Codec | None = None) -> OutboxEntry:
    """An :class:`OutboxEntry` from its stream fields, the event (``e``)
    and the last error (``err``) opened with ``codec`` when sealed;
    ``ValueError`` says what is damaged (a sealed value no key opens
    included)."""
    f = stream_fields(raw)
    delivery_id, key = b2s(f.get(b"id")), b2s(f.get(b"k"))
    if not delivery_id or not key:
        raise ValueError("no delivery id (id) or no instance key (k)")
    try:
        event = loads_tagged(unseal_bytes(codec, f[b"e"]))
    except UnsealError as exc:
        raise ValueError(f"the event (e) is sealed: {exc}") from None
    except (KeyError, ValueError, TypeError):
        raise ValueError("the event (e) is missing or not JSON") from None
    if not isinstance(event, dict):
        raise ValueError("the event (e) is not a JSON object")
    version, attempts, emitted = _number(f, "v"), _number(f, "a", 0), _number(f, "t", 0)
    try:
        last_error = unseal(codec, f.get(b"err"))
    except UnsealError as exc:
        raise ValueError(f"the last error (err) is sealed: {exc}") from None
    return OutboxEntry(
        delivery_id, key, b2s(f.get(b"m")), version, event, attempts, emitted, last_error
    )


def lenient_entry(raw: Any, codec: Codec | None = None) -> OutboxEntry:
    """What a listing shows of an entry, damaged or not (never raises)."""
    try:
        return parse_entry(raw, codec)
    except ValueError as exc:
        f = stream_fields(raw)
        v, a, t = (
            int(x) if (x := b2s(f.get(n))).isascii() and x.isdigit() else 0
            for n in (b"v", b"a", b"t")
        )
        err = f.get(b"err")
        why = (f"damaged: {exc}" if is_sealed(err) else b2s(err)) or f"damaged: {exc}"
        return OutboxEntry(b2s(f.get(b"id")), b2s(f.get(b"k")), b2s(f.get(b"m")), v, {}, a, t, why)


def waiting_fields(raw: Any, delivery_id: str) -> Any:
    """The fields of a waiting entry (a JSON list of field, value strings)."""
    try:
        flat = json.loads(raw)
        if isinstance(flat, list) and len(flat) % 2 == 0:
            return flat
    except ValueError:
        pass
    return ["id", delivery_id, "err", "damaged retry entry: not a list of fields"]


def stream_rows(reply: Any) -> list[tuple[str, Any]]:
    """(stream id, fields) of an XRANGE reply, parsed by redis-py or not."""
    return [(b2s(row[0]), row[1]) for row in reply or () if row and row[0] is not None]


def id_key(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms or 0), int(seq or 0)


def allocate(budget: int, available: Mapping[int, int], turn: int) -> dict[int, int]:
    """Split ``budget`` over buckets, none getting more than it has
    ``available``: evenly, the remainder going round from the ``turn``-th
    bucket (so a budget smaller than the bucket count visits each in turn).
    The shares never add up to more than ``budget``."""
    order = sorted(available)
    if order:
        k = turn % len(order)
        order = order[k:] + order[:k]
    shares = dict.fromkeys(order, 0)
    active = [b for b in order if available[b] > 0]
    left = budget
    while left > 0 and active:
        each, extra = divmod(left, len(active))
        for i, b in enumerate(active):
            give = min(each + (1 if i < extra else 0), available[b] - shares[b])
            shares[b] += give
            left -= give
        # a round that capped no bucket gave out all that was left
        active = [b for b in active if shares[b] < available[b]]
    return {b: n for b, n in shares.items() if n}


def key_of(lease: object) -> str | None:
    return lease.entry.key if isinstance(lease, OutboxLease) else None


def check_ms(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidConfigError(f"{name} must be an int >= 0 (ms), got {brief(value)}", path=name)
    return value


_ALL = ("outbox", "outbox_retry", "outbox_waiting", "outbox_dead")
#: The KEYS of each script (KeyLayout methods of the bucket, in order).
_KEYS: dict[str, tuple[str, ...]] = {
    "OUTBOX_PROMOTE": _ALL,
    "OUTBOX_FAIL": _ALL,
    "OUTBOX_STATS": _ALL,
    "OUTBOX_RECLAIM": ("outbox",),
    "OUTBOX_READ": ("outbox",),
    "OUTBOX_ACK": ("outbox",),
    "OUTBOX_PENDING": ("outbox",),
    "OUTBOX_REDRIVE": ("outbox", "outbox_dead"),
    "OUTBOX_REDRIVE_PAGE": ("outbox", "outbox_dead"),
    "OUTBOX_PURGE_DEAD": ("outbox_dead",),
}


def bucket_call(layout: KeyLayout, script: str, b: int, args: Sequence[Any]) -> Call:
    return Call(script, [getattr(layout, name)(b) for name in _KEYS[script]], list(args))


def bucket_calls(layout: KeyLayout, script: str, args: Mapping[int, Sequence[Any]]) -> Many:
    """``script`` once per bucket of ``args``, in one pipeline."""
    return Many(tuple(bucket_call(layout, script, b, a) for b, a in args.items()))
