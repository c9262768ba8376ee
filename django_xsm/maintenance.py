"""Namespace-wide maintenance reads and removals the operations commands need.

These compose the Redis layer's own pieces (the namespace's
:class:`~django_xsm.redis.KeyLayout`, its scripts, and the drivers that
translate redis-py errors into ``StoreUnavailableError`` / ``StoreError``)
where the public store, inbox and log APIs answer a different question:

* which machine each of many keys belongs to, in one pipelined round trip
  (``HGET <snapshot> m``; no snapshot is decoded);
* which log streams hold records older than a cutoff, without removing
  anything (the per-bucket log index, for ``xsm_purge_logs --dry-run`` and
  ``--machine``);
* how many idempotency rows have expired (``ZCOUNT`` on the per-bucket
  inbox expiry index), and removing at most ``limit`` of them;
* the idempotency rows of one instance (``xsm_forget``).

Costs are stated per function; none scans the keyspace.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django_xsm.redis import escape_glob
from django_xsm.redis.core import Cmd, Many, Op
from django_xsm.redis.keys import SEP, KeyLayout
from django_xsm.redis.ops import Call, b2s

__all__ = [
    "count_expired_inbox_rows",
    "forget_inbox_rows",
    "inbox_rows_of",
    "iter_chunks",
    "layout_of",
    "machine_ids",
    "old_log_streams",
    "purge_inbox_rows",
]

PAGE = 500


def _one(request: Any) -> Op:
    reply = yield request
    return reply


def layout_of(component: Any) -> KeyLayout:
    """The namespace layout of a Redis store, inbox or log (reads the schema
    marker on first use)."""
    layout: KeyLayout = component.driver.run(component.core.state.ensure())
    return layout


def _pairs(reply: Any) -> list[tuple[Any, Any]]:
    """(member, score) pairs of a ZSCAN page, parsed by redis-py or flat."""
    if reply and isinstance(reply[0], list | tuple):
        return [(m, s) for m, s in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


def machine_ids(store: Any, keys: Sequence[str]) -> dict[str, str]:
    """Key -> machine id of its stored record ('' when the record is gone).
    One pipelined round trip, plus one load per record written without
    its machine id (only records older than the machine id field)."""
    if not keys:
        return {}
    layout = layout_of(store)
    replies = store.driver.run(
        _one(Many(tuple(Cmd("HGET", (layout.snapshot(k), "m")) for k in keys)))
    )
    found: dict[str, str] = {}
    for key, raw in zip(keys, replies, strict=True):
        machine_id = b2s(raw)
        if raw is not None and not machine_id:
            record = store.load(key)
            if record is not None:
                machine_id = record.machine_id or str(record.snapshot.get("machine_id", ""))
        found[key] = machine_id
    return found


def old_log_streams(log: Any, cutoff_ms: int, bucket: int) -> list[str]:
    """Keys of the streams of ``bucket`` whose oldest record is older than
    ``cutoff_ms``. Read-only; costs the number of such streams."""
    layout = layout_of(log)
    keys: list[str] = []
    offset = 0
    while True:
        page = log.driver.run(
            _one(
                Cmd(
                    "ZRANGEBYSCORE",
                    (layout.log_index(bucket), "-inf", f"({cutoff_ms}", "LIMIT", offset, PAGE),
                )
            )
        )
        keys.extend(b2s(k) for k in page)
        if len(page) < PAGE:
            return keys
        offset += PAGE


def count_expired_inbox_rows(inbox: Any) -> int:
    """Idempotency rows whose time is up, by the Redis server's clock (what
    ``purge_inbox_rows`` would remove). One ``TIME`` plus one pipelined
    ``ZCOUNT`` per bucket: logarithmic in the number of rows."""
    layout = layout_of(inbox)
    seconds, micros = inbox.driver.run(_one(Cmd("TIME", ())))
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    counts = inbox.driver.run(
        _one(
            Many(
                tuple(
                    Cmd("ZCOUNT", (layout.inbox_expiry(b), "-inf", now_ms))
                    for b in range(layout.buckets)
                )
            )
        )
    )
    return sum(int(c) for c in counts)


def purge_inbox_rows(inbox: Any, limit: int | None = None, *, batch: int = 1000) -> int:
    """Remove expired idempotency rows, at most ``limit`` (None: all of
    them); returns how many. Each round trip is the inbox's own
    ``PURGE_INBOX`` script on one bucket, so the cost is the number of
    expired rows removed plus one round trip per bucket."""
    layout = layout_of(inbox)
    removed = 0
    for b in range(layout.buckets):
        while limit is None or removed < limit:
            size = batch if limit is None else min(batch, limit - removed)
            n = int(inbox.driver.run(_one(Call("PURGE_INBOX", [layout.inbox_expiry(b)], [size]))))
            removed += n
            if n < size:
                break
    return removed


def inbox_rows_of(inbox: Any, key: str) -> list[tuple[str, str, str]]:
    """``(hash, field, index member)`` of every idempotency row of instance
    ``key``, expired ones included. Rows live in the instance's bucket;
    this walks that bucket's expiry index (ZSCAN, about total rows /
    buckets)."""
    layout = layout_of(inbox)
    index = layout.inbox_expiry(layout.bucket(key))
    pattern = f"*{SEP}{escape_glob(key)}{SEP}*"
    rows: list[tuple[str, str, str]] = []
    cursor: Any = 0
    while True:
        cursor, page = inbox.driver.run(
            _one(Cmd("ZSCAN", (index, cursor, "MATCH", pattern, "COUNT", PAGE))), key
        )
        for raw, _score in _pairs(page):
            member = b2s(raw)
            hash_key, _, field = member.partition(SEP)
            if field.partition(SEP)[0] == key:
                rows.append((hash_key, field, member))
        if int(cursor) == 0:
            return rows


def forget_inbox_rows(inbox: Any, key: str, rows: Iterable[tuple[str, str, str]] = ()) -> int:
    """Delete the idempotency rows of instance ``key`` (found afresh unless
    ``rows`` is given); returns how many rows were deleted."""
    found = list(rows) or inbox_rows_of(inbox, key)
    if not found:
        return 0
    layout = layout_of(inbox)
    index = layout.inbox_expiry(layout.bucket(key))
    requests: list[Cmd] = []
    for hash_key, field, member in found:
        requests += [Cmd("HDEL", (hash_key, field)), Cmd("ZREM", (index, member))]
    replies = inbox.driver.run(_one(Many(tuple(requests))), key)
    return sum(int(r) for r in replies[::2])


def iter_chunks(items: Iterable[str], size: int = PAGE) -> Iterator[list[str]]:
    """``items`` in lists of at most ``size``."""
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
