"""RedisLog / AsyncRedisLog: per-instance transition logs on Redis Streams.

One stream per instance (``{p:b}:log:<key>``), entry id ``<seq>-0`` so
``XRANGE`` pages by seq; ``maxlen`` trims approximately (``MAXLEN ~``). A
per-bucket index scores each stream by its oldest record, so
``purge_older_than`` and ``count_older_than`` only visit streams that hold
something to purge (``streams_older_than`` lists them). ``wait`` blocks on
one stream (``XREAD BLOCK``) until records after a seq are committed: what
the live stream (``django_xsm.stream``) follows an instance with.
"""

from __future__ import annotations

import datetime as _dt
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.arguments import (
    check_log_read,
    check_read_last,
    validate_key,
    validate_maxlen,
    validate_seconds,
    wall_to_ms,
)
from django_xsm.persistence.base import Codec
from django_xsm.persistence.codecs import JsonCodec
from django_xsm.persistence.records import LogEntry, TransitionRecord

from . import calls
from .calls import Call, b2s
from .client import AsyncSide, RedisSide, SyncSide, socket_timeout_of
from .core import Cmd, LayoutState, Many, Op

__all__ = ["MAX_SEQ", "AsyncRedisLog", "LogCore", "RedisLog"]

PAGE = 500
#: The longest single ``XREAD BLOCK`` of :meth:`RedisLog.wait` (s), unless
#: half the client's socket timeout is shorter (the read must return first).
WAIT_SLICE_S = 15.0
#: The largest seq a stream entry id can carry (Redis ids are 64-bit
#: unsigned; seqs stay below 2**63 so every client reads them as ints).
MAX_SEQ = 2**63 - 1


class LogCore:
    """What RedisLog and AsyncRedisLog do, minus the sending."""

    def __init__(
        self, prefix: str, buckets: int | None, maxlen: int | None, codec: Codec | None = None
    ) -> None:
        validate_maxlen(maxlen, "maxlen")
        self.state = LayoutState(prefix, buckets)
        self.maxlen = maxlen
        #: Seals payloads, actors and reasons when it can (the store's codec).
        self.codec: Codec = codec or JsonCodec()
        #: The longest XREAD BLOCK of wait() (s): WAIT_SLICE_S, or half the
        #: client's socket timeout when that is shorter.
        self.wait_slice_s = WAIT_SLICE_S

    def append(self, record: TransitionRecord) -> Op[int]:
        seq = yield from self.append_next(record.key, record.entry, record.version, record.seq)
        if seq < 0:
            raise InvalidConfigError(
                f"seq {record.seq} is not above the last seq of {record.key!r}",
                path="record.seq",
                hint="use append_next() to let the log number records",
            )
        return seq

    def append_next(self, key: str, entry: LogEntry, version: int, seq: int = 0) -> Op[int]:
        """LOG_APPEND: the seq used (``seq`` 0: the last + 1), or -1 when
        ``seq`` is not above the last."""
        validate_key(key)
        layout = yield from self.state.ensure()
        keys = [layout.log(key), layout.log_index(layout.bucket(key))]
        args = [key, seq, self.maxlen or 0, version, *calls.entry_args(entry, self.codec)]
        return int((yield Call("LOG_APPEND", keys, args)))

    def read(self, key: str, after_seq: int, limit: int | None) -> Op[list[TransitionRecord]]:
        validate_key(key)
        check_log_read(after_seq, limit)
        layout = yield from self.state.ensure()
        out: list[TransitionRecord] = []
        start = f"({int(after_seq)}-0" if after_seq > 0 else "-"
        while True:
            count = PAGE if limit is None else min(PAGE, limit - len(out))
            rows = yield Cmd("XRANGE", (layout.log(key), start, "+", "COUNT", count))
            page = calls.parse_stream_rows(key, rows, self.codec)
            out.extend(page)
            if len(page) < count or (limit is not None and len(out) >= limit):
                return out
            start = f"({page[-1].seq}-0"

    def read_last(self, key: str, count: int) -> Op[list[TransitionRecord]]:
        validate_key(key)
        check_read_last(count)
        layout = yield from self.state.ensure()
        if count < 1:
            return []
        rows = yield Cmd("XREVRANGE", (layout.log(key), "+", "-", "COUNT", count))
        return list(reversed(calls.parse_stream_rows(key, rows, self.codec)))

    def last_seq(self, key: str) -> Op[int]:
        rows = yield from self.read_last(key, 1)
        return rows[-1].seq if rows else 0

    def wait(
        self, key: str, after_seq: int, seconds: float, limit: int
    ) -> Op[list[TransitionRecord]]:
        """The first ``limit`` records after ``after_seq``, waiting at most
        ``seconds`` (and at most ``wait_slice_s``) for one to be appended:
        one ``XREAD BLOCK`` on the key's stream; [] when none came."""
        validate_key(key)
        if (
            isinstance(after_seq, bool)
            or not isinstance(after_seq, int)
            or not 0 <= after_seq <= MAX_SEQ
        ):
            raise InvalidConfigError(
                f"after_seq must be an int from 0 to {MAX_SEQ}, got {after_seq!r}",
                path="after_seq",
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidConfigError(f"limit must be a positive int, got {limit!r}", path="limit")
        slice_s = self.wait_slice_s * random.uniform(0.75, 1.0)
        seconds = min(validate_seconds(seconds), slice_s)
        if not seconds >= 0.001:  # BLOCK 0 blocks forever (and NaN is no time)
            return (yield from self.read(key, after_seq, limit))
        block_ms = int(seconds * 1000)
        layout = yield from self.state.ensure()
        reply = yield Cmd(
            "XREAD",
            ("COUNT", limit, "BLOCK", block_ms, "STREAMS", layout.log(key), f"{after_seq}-0"),
        )
        if not reply:
            return []
        # RESP2: [[stream, rows]]; RESP3: {stream: rows}
        streams = reply.values() if isinstance(reply, Mapping) else (r[1] for r in reply)
        return [
            record for rows in streams for record in calls.parse_stream_rows(key, rows, self.codec)
        ]

    def purge_stream(self, key: str, cutoff: int) -> Op[int]:
        layout = yield from self.state.ensure()
        removed, start, oldest = 0, "-", ""
        while True:
            n, more, start, oldest = yield Call(
                "LOG_PURGE",
                [layout.log(key), layout.log_index(layout.bucket(key))],
                [key, cutoff, PAGE, start, oldest],
            )
            removed += int(n)
            if not int(more):
                return removed
            start, oldest = b2s(start), b2s(oldest)

    def each_old_stream(
        self,
        cutoff: float | _dt.datetime,
        key: str | None,
        progress: Callable[[str, int], None] | None,
        per_stream: Callable[[str, int], Op[int]],
    ) -> Op[int]:
        """Run ``per_stream(key, cutoff_ms)`` on ``key``, or on every stream
        holding a record older than the cutoff (one bucket's candidates in
        memory at a time); report each to ``progress``; sum the results."""
        limit_ms = wall_to_ms(cutoff)
        if key is not None:
            groups: Sequence[Any] = [[validate_key(key)]]
        else:
            layout = yield from self.state.ensure()
            groups = range(layout.buckets)
        total = 0
        for group in groups:
            if isinstance(group, list):
                keys = group
            else:
                keys = yield from self._old_streams(limit_ms, group)
            for k in keys:
                n = yield from per_stream(k, limit_ms)
                total += n
                if progress:
                    progress(k, n)
        return total

    def bucket_count(self) -> Op[int]:
        layout = yield from self.state.ensure()
        return layout.buckets

    def _old_streams(self, limit_ms: int, bucket: int | None) -> Op[list[str]]:
        layout = yield from self.state.ensure()
        if bucket is None:
            buckets: Sequence[int] = range(layout.buckets)
        elif isinstance(bucket, bool) or not isinstance(bucket, int):
            raise InvalidConfigError(f"bucket must be an int, got {brief(bucket)}", path="bucket")
        elif not 0 <= bucket < layout.buckets:
            raise InvalidConfigError(
                f"bucket {bucket} is out of range: this namespace has {layout.buckets}",
                path="bucket",
                hint="use bucket_count()",
            )
        else:
            buckets = [bucket]
        # The index orders streams by (oldest record, key), so the old ones
        # are its first ZCOUNT ranks: pages by rank cost the page, where
        # LIMIT offsets would cost every member before them.
        counts = yield Many(
            tuple(Cmd("ZCOUNT", (layout.log_index(b), "-inf", f"({limit_ms}")) for b in buckets)
        )
        pages = yield Many(
            tuple(
                Cmd("ZRANGE", (layout.log_index(b), start, min(start + PAGE, int(n)) - 1))
                for b, n in zip(buckets, counts, strict=True)
                for start in range(0, int(n), PAGE)
            )
        )
        return list(dict.fromkeys(b2s(k) for page in pages for k in page))

    def streams_older_than(self, cutoff: float | _dt.datetime, bucket: int | None) -> Op[list[str]]:
        return (yield from self._old_streams(wall_to_ms(cutoff), bucket))

    def count_stream(self, key: str, cutoff: int) -> Op[int]:
        # What LOG_PURGE removes: every record older than the cutoff.
        layout = yield from self.state.ensure()
        count, start = 0, "-"
        while True:
            rows = yield Cmd("XRANGE", (layout.log(key), start, "+", "COUNT", PAGE))
            page = calls.parse_stream_rows(key, rows, self.codec)
            count += sum(1 for record in page if record.timestamp_ms < cutoff)
            if len(page) < PAGE:
                return count
            start = f"({page[-1].seq}-0"

    def forget(self, key: str) -> Op[int]:
        validate_key(key)
        layout = yield from self.state.ensure()
        n, _deleted, _zrem = yield Many(
            (
                Cmd("XLEN", (layout.log(key),)),
                Cmd("DEL", (layout.log(key),)),
                Cmd("ZREM", (layout.log_index(layout.bucket(key)), key)),
            )
        )
        return int(n)


class _LogBase(RedisSide):
    """The constructor shared by both twins. ``maxlen`` caps each stream
    approximately (``MAXLEN ~``); None keeps every record. ``codec``: the
    store's codec; one that encrypts (``FernetCodec``) seals each record's
    payload, actor and reason (docs/security.md)."""

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str,
        maxlen: int | None = None,
        buckets: int | None = None,
        codec: Codec | None = None,
    ) -> None:
        self._connect(client_or_url)
        self.prefix = prefix
        self.maxlen = maxlen
        self.core = LogCore(prefix, buckets, maxlen, codec)
        timeout = socket_timeout_of(self.client)
        if timeout is not None:
            self.core.wait_slice_s = min(self.core.wait_slice_s, timeout / 2)


class RedisLog(SyncSide, _LogBase):
    """Transition log on a blocking client; see TransitionLogStore."""

    def append(self, record: TransitionRecord) -> int:
        return self.driver.run(self.core.append(record), record.key)

    def append_next(self, key: str, entry: LogEntry, *, version: int) -> int:
        return self.driver.run(self.core.append_next(key, entry, version), key)

    def read(
        self, key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TransitionRecord]:
        return self.driver.run(self.core.read(key, after_seq, limit), key)

    def read_last(self, key: str, *, count: int = 20) -> list[TransitionRecord]:
        return self.driver.run(self.core.read_last(key, count), key)

    def last_seq(self, key: str) -> int:
        return self.driver.run(self.core.last_seq(key), key)

    def wait(
        self, key: str, *, after_seq: int, timeout_s: float, limit: int = 100
    ) -> list[TransitionRecord]:
        """The records after ``after_seq`` in seq order (at most ``limit``),
        waiting at most ``timeout_s`` for one to be committed: one
        ``XREAD BLOCK`` on the instance's stream, so a commit made by any
        process wakes it at once. [] when none came in time; a wait is cut
        to half the client's socket timeout (call again to wait longer).
        Records trimmed away are skipped: the first one returned may come
        after ``after_seq + 1``."""
        return self.driver.run(self.core.wait(key, after_seq, timeout_s, limit), key)

    def purge_older_than(
        self,
        cutoff: float | _dt.datetime,
        *,
        key: str | None = None,
        progress: Callable[[str, int], None] | None = None,
    ) -> int:
        """Remove every record older than ``cutoff`` (seconds since the epoch
        or an aware datetime), also records that sit behind newer ones
        (skewed clocks); ``progress(key, removed)`` is called per stream.
        Returns the number removed (costs: docs/redis.md, "Maintenance")."""
        op = self.core.each_old_stream(cutoff, key, progress, self.core.purge_stream)
        return self.driver.run(op, key)

    def count_older_than(
        self,
        cutoff: float | _dt.datetime,
        *,
        key: str | None = None,
        progress: Callable[[str, int], None] | None = None,
    ) -> int:
        """How many records ``purge_older_than`` with the same arguments
        would remove now; ``progress(key, records)`` is called per stream.
        Read-only."""
        op = self.core.each_old_stream(cutoff, key, progress, self.core.count_stream)
        return self.driver.run(op, key)

    def streams_older_than(
        self, cutoff: float | _dt.datetime, *, bucket: int | None = None
    ) -> list[str]:
        """Keys of the streams whose oldest record is older than ``cutoff``
        (seconds since the epoch or an aware datetime), oldest first per
        bucket; only ``bucket`` (0 to ``bucket_count() - 1``) when given.
        Read-only. A stream whose instance expired or was deleted keeps its
        place until purged."""
        return self.driver.run(self.core.streams_older_than(cutoff, bucket))

    def bucket_count(self) -> int:
        """The namespace's bucket count (reads the schema marker on first
        use only)."""
        return self.driver.run(self.core.bucket_count())

    def forget(self, key: str) -> int:
        return self.driver.run(self.core.forget(key), key)


class AsyncRedisLog(AsyncSide, _LogBase):
    """The asyncio twin of :class:`RedisLog`."""

    async def append(self, record: TransitionRecord) -> int:
        return await self.driver.run(self.core.append(record), record.key)

    async def append_next(self, key: str, entry: LogEntry, *, version: int) -> int:
        return await self.driver.run(self.core.append_next(key, entry, version), key)

    async def read(
        self, key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TransitionRecord]:
        return await self.driver.run(self.core.read(key, after_seq, limit), key)

    async def read_last(self, key: str, *, count: int = 20) -> list[TransitionRecord]:
        return await self.driver.run(self.core.read_last(key, count), key)

    async def last_seq(self, key: str) -> int:
        return await self.driver.run(self.core.last_seq(key), key)

    async def wait(
        self, key: str, *, after_seq: int, timeout_s: float, limit: int = 100
    ) -> list[TransitionRecord]:
        """The asyncio twin of :meth:`RedisLog.wait`: the event loop goes on
        while the ``XREAD`` blocks its connection."""
        op = self.core.wait(key, after_seq, timeout_s, limit)
        return await self.driver.run(op, key)

    async def purge_older_than(
        self,
        cutoff: float | _dt.datetime,
        *,
        key: str | None = None,
        progress: Callable[[str, int], None] | None = None,
    ) -> int:
        op = self.core.each_old_stream(cutoff, key, progress, self.core.purge_stream)
        return await self.driver.run(op, key)

    async def count_older_than(
        self,
        cutoff: float | _dt.datetime,
        *,
        key: str | None = None,
        progress: Callable[[str, int], None] | None = None,
    ) -> int:
        op = self.core.each_old_stream(cutoff, key, progress, self.core.count_stream)
        return await self.driver.run(op, key)

    async def streams_older_than(
        self, cutoff: float | _dt.datetime, *, bucket: int | None = None
    ) -> list[str]:
        return await self.driver.run(self.core.streams_older_than(cutoff, bucket))

    async def bucket_count(self) -> int:
        return await self.driver.run(self.core.bucket_count())

    async def forget(self, key: str) -> int:
        return await self.driver.run(self.core.forget(key), key)
