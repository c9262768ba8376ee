"""RedisOutbox: workers deliver what commits emitted (the read side of the outbox).

Workers read the buckets' outbox streams, which COMMIT appends to, through
one consumer group (created from id 0 on first use) and get
:class:`OutboxLease` objects; :meth:`RedisOutbox.ack` and
:meth:`RedisOutbox.fail` remove the entry (XACK + XDEL in one script) only
while its consumer still holds it. Delivery is at least once: a lease
neither acknowledged nor failed within the visibility timeout is reclaimed
by the next ``take()``, and the late ack is refused (``False``). Retries,
dead letters and ordering: docs/outbox.md. Times are the Redis server's,
except ``retry_at_ms`` and ``take(now_ms=...)``, which the caller names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.arguments import validate_key, validate_limit, validate_text
from django_xsm.persistence.base import Codec
from django_xsm.persistence.codecs import JsonCodec
from django_xsm.persistence.outbox import (
    OutboxEntry,
    OutboxObserver,
    notify_ended,
    notify_taken,
    observers_of,
)
from django_xsm.persistence.sealing import seal

from .calls import b2s, score_pairs, stream_fields, time_ms
from .client import SyncSide
from .core import Cmd, LayoutState, Many, Op
from .keys import KeyLayout
from .outbox_entries import (
    MAX_ERROR,
    PAGE,
    RECLAIM_CALLS,
    REDRIVE_SCAN,
    STREAM_ID,
    DeadLetter,
    FailOutcome,
    OutboxLease,
    allocate,
    bucket_call,
    bucket_calls,
    check_ms,
    id_key,
    key_of,
    lenient_entry,
    parse_entry,
    stream_rows,
    waiting_fields,
)

__all__ = ["DeadLetter", "FailOutcome", "OutboxCore", "OutboxLease", "RedisOutbox", "parse_entry"]

#: the bucket part of a ``DeadLetter.cursor`` (``""``: after the id everywhere)
_BUCKET = re.compile(r"[0-9]{0,6}")

# --- the operations, once ------------------------------------------------------------


class OutboxCore:
    """What RedisOutbox does, minus the sending."""

    def __init__(
        self, prefix: str, buckets: int | None, group: str, codec: Codec | None = None
    ) -> None:
        self.state = LayoutState(prefix, buckets)
        #: Opens sealed events and errors, seals the errors fail() stores.
        self.codec: Codec = codec or JsonCodec()
        self.group = validate_key(group, what="group")
        self._turn = 0  # which bucket a share's remainder starts with

    def take(
        self, consumer: str, count: int, visibility_ms: int, now_ms: int | None = None
    ) -> Op[list[OutboxLease]]:
        validate_key(consumer, what="consumer")
        validate_limit(count, name="count")
        validate_limit(visibility_ms, name="visibility_timeout_ms")
        due_by = "" if now_ms is None else check_ms(now_ms, "now_ms")
        layout = yield from self.state.ensure()
        g, turn, self._turn = self.group, self._turn, self._turn + 1
        # 1: due retries back into the streams, and what each bucket offers
        asked = {b: [g, count, visibility_ms, count, due_by] for b in range(layout.buckets)}
        probes = dict(
            zip(asked, (yield bucket_calls(layout, "OUTBOX_PROMOTE", asked)), strict=True)
        )
        rows: list[tuple[int, Any, Any, int]] = []  # bucket, stream id, fields, deliveries
        # 2: leases held past the visibility timeout (their worker is gone)
        shares = allocate(count, {b: int(p[2]) for b, p in probes.items()}, turn)
        if shares:
            asked = {b: [g, consumer, visibility_ms, n, RECLAIM_CALLS] for b, n in shares.items()}
            replies = yield bucket_calls(layout, "OUTBOX_RECLAIM", asked)
            for b, reply in zip(shares, replies, strict=True):
                rows += [(b, sid, fields, int(n)) for sid, fields, n in reply]
        # 3: entries nobody had yet
        shares = allocate(count - len(rows), {b: int(p[3]) for b, p in probes.items()}, turn)
        if shares:
            asked = {b: [g, consumer, n] for b, n in shares.items()}
            replies = yield bucket_calls(layout, "OUTBOX_READ", asked)
            for b, reply in zip(shares, replies, strict=True):
                rows += [(b, sid, fields, 1) for sid, fields in reply]
        leases, damaged = [], []
        for b, sid, fields, n in rows:
            try:
                entry = parse_entry(fields, self.codec)
            except ValueError as exc:
                why = f"damaged outbox entry: {exc}"
                damaged.append(
                    bucket_call(layout, "OUTBOX_FAIL", b, [g, sid, consumer, n, "", why, ""])
                )
                continue
            if n > 1:  # each delivery that ended without ack or fail was an attempt
                entry = replace(entry, attempts=entry.attempts + n - 1)
            leases.append(OutboxLease(entry, b2s(sid), b, consumer, n))
        if damaged:
            yield Many(tuple(damaged))
        leases.sort(key=lambda lease: (id_key(lease.stream_id), lease.bucket))
        return leases

    def _lease_layout(self, lease: OutboxLease) -> Op[KeyLayout]:
        if not isinstance(lease, OutboxLease):
            raise InvalidConfigError(
                f"expected an OutboxLease from take(), got {type(lease).__name__}", path="lease"
            )
        layout = yield from self.state.ensure()
        if not 0 <= lease.bucket < layout.buckets or not STREAM_ID.fullmatch(lease.stream_id):
            raise InvalidConfigError("this lease is not from this namespace's take()", path="lease")
        return layout

    def _held(self, lease: OutboxLease) -> list[Any]:
        """The ARGV that names a lease: group, stream id, consumer, deliveries."""
        return [self.group, lease.stream_id, lease.consumer, lease.deliveries]

    def ack(self, lease: OutboxLease) -> Op[bool]:
        layout = yield from self._lease_layout(lease)
        return bool(int((yield bucket_call(layout, "OUTBOX_ACK", lease.bucket, self._held(lease)))))

    def ack_many(self, leases: Sequence[OutboxLease]) -> Op[list[bool]]:
        if not leases:
            return []
        layout = yield from self._lease_layout(leases[0])
        for lease in leases[1:]:  # the same checks as one ack, for each
            yield from self._lease_layout(lease)
        replies = yield Many(
            tuple(bucket_call(layout, "OUTBOX_ACK", b.bucket, self._held(b)) for b in leases)
        )
        return [bool(int(reply)) for reply in replies]

    def fail(self, lease: OutboxLease, error: str, retry_at_ms: int | None) -> Op[FailOutcome]:
        validate_text(error, "error")
        retry = "" if retry_at_ms is None else check_ms(retry_at_ms, "retry_at_ms")
        layout = yield from self._lease_layout(lease)
        sealed = seal(self.codec, error[:MAX_ERROR])
        args = [*self._held(lease), lease.entry.attempts + 1, sealed, retry]
        outcome = b2s((yield bucket_call(layout, "OUTBOX_FAIL", lease.bucket, args)))
        if outcome == "retry":
            return "retry"
        return "dead" if outcome == "dead" else "lost"

    # --- what is where ----------------------------------------------------------------

    def dead_letters(self, limit: int, after: str) -> Op[list[DeadLetter]]:
        validate_limit(limit)
        validate_text(after, "after")
        at, _, at_bucket = after.partition("/")
        if after and not (STREAM_ID.fullmatch(at) and _BUCKET.fullmatch(at_bucket)):
            raise InvalidConfigError(
                f"after must be a DeadLetter.cursor, got {brief(after)}", path="after"
            )
        layout = yield from self.state.ensure()
        last = int(at_bucket) if at_bucket else layout.buckets  # a bare id: after it everywhere
        starts = {b: "-" if not at else at if b > last else "(" + at for b in range(layout.buckets)}
        replies = yield _dead_pages(layout, starts, limit)
        letters = []
        for b, reply in zip(starts, replies, strict=True):
            for sid, raw in stream_rows(reply):
                f = stream_fields(raw)
                dead = b2s(f.get(b"dt"))
                dead_ms = int(dead) if dead.isascii() and dead.isdigit() else id_key(sid)[0]
                letters.append(DeadLetter(lenient_entry(f, self.codec), dead_ms, sid, b))
        letters.sort(key=lambda d: (id_key(d.stream_id), d.bucket))
        return letters[:limit]

    def waiting(self, limit: int) -> Op[list[tuple[OutboxEntry, int]]]:
        validate_limit(limit)
        layout = yield from self.state.ensure()
        buckets = range(layout.buckets)
        replies = yield Many(
            tuple(
                Cmd("ZRANGE", (layout.outbox_retry(b), 0, limit - 1, "WITHSCORES")) for b in buckets
            )
        )
        due = sorted(
            (int(float(s)), b2s(m), b)
            for b, r in zip(buckets, replies, strict=True)
            for m, s in score_pairs(r)
        )[:limit]
        raws = yield Many(tuple(Cmd("HGET", (layout.outbox_waiting(b), m)) for _, m, b in due))
        return [
            (lenient_entry(waiting_fields(raw, m), self.codec), ms)
            for (ms, m, _), raw in zip(due, raws, strict=True)
            if raw is not None  # promoted in between
        ]

    def pending(self, limit: int) -> Op[list[tuple[OutboxEntry, str, int]]]:
        validate_limit(limit)
        layout = yield from self.state.ensure()
        asked = {b: [self.group, limit] for b in range(layout.buckets)}
        replies = yield bucket_calls(layout, "OUTBOX_PENDING", asked)
        rows = sorted(
            (id_key(b2s(sid)), b, fields, b2s(who), int(idle))
            for b, reply in zip(asked, replies, strict=True)
            for sid, fields, who, idle in reply
        )
        return [
            (lenient_entry(fields, self.codec), who, idle)
            for _, _, fields, who, idle in rows[:limit]
        ]

    def stats(self) -> Op[dict[str, int]]:
        layout = yield from self.state.ensure()
        replies = yield bucket_calls(layout, "OUTBOX_STATS", {b: [] for b in range(layout.buckets)})
        oldest = [int(r[3]) for r in replies if int(r[3]) >= 0]
        now = max(int(r[4]) for r in replies)
        return {
            "pending": sum(int(r[0]) for r in replies),
            "retrying": sum(int(r[1]) for r in replies),
            "dead": sum(int(r[2]) for r in replies),
            "lag_ms": max(0, now - min(oldest)) if oldest else 0,
        }

    # --- dead letters ---------------------------------------------------------------------

    def redrive(self, delivery_id: str) -> Op[bool]:
        validate_key(delivery_id, what="delivery_id")
        layout = yield from self.state.ensure()
        starts = dict.fromkeys(range(layout.buckets), "-")
        for _ in range(0, REDRIVE_SCAN, PAGE):
            asked, starts = starts, {}
            replies = yield _dead_pages(layout, asked, PAGE)
            for b, reply in zip(asked, replies, strict=True):
                rows = stream_rows(reply)
                for sid, raw in rows:
                    if b2s(stream_fields(raw).get(b"id")) == delivery_id:
                        call = bucket_call(layout, "OUTBOX_REDRIVE", b, [sid, delivery_id])
                        return bool(int((yield call)))
                if len(rows) == PAGE:
                    starts[b] = "(" + rows[-1][0]
            if not starts:
                break
        return False

    def redrive_all(self, limit: int | None) -> Op[int]:
        validate_limit(limit, optional=True)
        layout = yield from self.state.ensure()
        starts = dict.fromkeys(range(layout.buckets), "-")
        moved = 0
        while starts and (limit is None or moved < limit):
            left = PAGE * len(starts) if limit is None else limit - moved
            shares = allocate(left, dict.fromkeys(starts, PAGE), 0)
            asked = {b: [starts[b], n] for b, n in shares.items()}
            replies = yield bucket_calls(layout, "OUTBOX_REDRIVE_PAGE", asked)
            for b, (got, after) in zip(asked, replies, strict=True):
                moved += int(got)  # at most its share: never past the limit
                if b2s(after):
                    starts[b] = b2s(after)
                else:
                    del starts[b]
        return moved

    def purge_dead(self, older_than_ms: int, dry_run: bool) -> Op[int]:
        check_ms(older_than_ms, "older_than_ms")
        layout = yield from self.state.ensure()
        cutoff = time_ms((yield Cmd("TIME", ()))) - older_than_ms
        starts = dict.fromkeys(range(layout.buckets), "-")
        total = 0
        while starts:
            asked = {b: [cutoff, PAGE, "1" if dry_run else "0", s] for b, s in starts.items()}
            replies = yield bucket_calls(layout, "OUTBOX_PURGE_DEAD", asked)
            starts = {}
            for b, (n, after) in zip(asked, replies, strict=True):
                total += int(n)
                if b2s(after):
                    starts[b] = b2s(after)
        return total


def _dead_pages(layout: KeyLayout, starts: Mapping[int, str], count: int) -> Many:
    """Up to ``count`` dead letters of each bucket from ``starts[bucket]`` (one XRANGE each)."""
    pages = (
        Cmd("XRANGE", (layout.outbox_dead(b), s, "+", "COUNT", count)) for b, s in starts.items()
    )
    return Many(tuple(pages))


# --- the blocking backend ---------------------------------------------------------------


class RedisOutbox(SyncSide):
    """The outbox's delivery side on a blocking client (workers are
    synchronous processes). ``prefix`` and ``buckets`` as for the store
    (construction does no I/O; the schema marker is read on first use);
    ``group`` names the consumer group every worker of this outbox joins;
    ``codec``: the store's codec (opens sealed entries, seals the errors
    ``fail()`` stores); ``observers``: what sees each lease taken and how
    it ended (metrics; see
    :class:`~django_xsm.persistence.outbox.OutboxObserver`),
    besides the process's (``add_process_observer``); their errors are
    logged, never raised.
    """

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str,
        buckets: int | None = None,
        group: str = "xsm",
        codec: Codec | None = None,
        observers: tuple[OutboxObserver, ...] = (),
    ) -> None:
        self.core = OutboxCore(prefix, buckets, group, codec)
        self.observers = tuple(observers)
        self._connect(client_or_url)
        self.prefix = prefix
        self.group = group

    def take(
        self,
        consumer: str,
        *,
        count: int = 100,
        visibility_timeout_ms: int = 60_000,
        now_ms: int | None = None,
    ) -> list[OutboxLease]:
        """Up to ``count`` leases for ``consumer`` (never more, in total),
        oldest first, split evenly over the buckets that offer something:
        due retries promoted, entries held longer than
        ``visibility_timeout_ms`` (a killed worker's) reclaimed, new entries
        read (docs/outbox.md, "Redis keys"). A delivery that ended without
        ack or fail counts as an attempt (``entry.attempts``). A damaged
        entry becomes a dead letter saying what is wrong instead of a lease.
        ``now_ms`` (epoch ms): the time retries are due by, instead of the
        server's clock (a test that moves django-xsm's clock; leases still
        expire by the server's)."""
        leases = self.driver.run(self.core.take(consumer, count, visibility_timeout_ms, now_ms))
        observers = observers_of(self.observers)
        if observers:
            notify_taken(observers, self, leases)
        return leases

    def ack(self, lease: OutboxLease) -> bool:
        """The handler succeeded: remove the entry. ``False`` when the lease
        was lost (reclaimed after the visibility timeout): then another
        delivery of the same ``delivery_id`` is under way or done."""
        acked = self.driver.run(self.core.ack(lease), key_of(lease))
        self._ended([(lease, "delivered" if acked else "lost")])
        return acked

    def ack_many(self, leases: Sequence[OutboxLease]) -> list[bool]:
        """:meth:`ack` for each of ``leases`` in one round trip (a worker
        acknowledges a batch after its handlers returned); one flag each."""
        acked = self.driver.run(self.core.ack_many(leases))
        self._ended(
            [
                (lease, "delivered" if ok else "lost")
                for lease, ok in zip(leases, acked, strict=True)
            ]
        )
        return acked

    def fail(self, lease: OutboxLease, error: str, *, retry_at_ms: int | None) -> FailOutcome:
        """The handler failed with ``error`` (stored redacted by the caller,
        truncated to 2000 characters). With ``retry_at_ms`` (epoch ms; the
        server's clock decides when it is due) the entry waits for its
        retry with one more attempt: ``"retry"``; without, it becomes a dead
        letter: ``"dead"``. ``"lost"`` when the lease was lost (nothing
        changed)."""
        outcome = self.driver.run(self.core.fail(lease, error, retry_at_ms), key_of(lease))
        self._ended([(lease, outcome)])
        return outcome

    def _ended(self, ended: list[tuple[OutboxLease, str]]) -> None:
        """Tell the observers how these leases ended."""
        observers = observers_of(self.observers)
        if observers:
            notify_ended(observers, self, ended)

    def dead_letters(self, *, limit: int = 100, after: str = "") -> list[DeadLetter]:
        """Dead letters, oldest first across buckets; the next page starts
        ``after`` the last one's ``cursor``. One pipelined XRANGE per bucket."""
        return self.driver.run(self.core.dead_letters(limit, after))

    def waiting(self, *, limit: int = 100) -> list[tuple[OutboxEntry, int]]:
        """Entries waiting for a retry with their due time (ms), soonest first."""
        return self.driver.run(self.core.waiting(limit))

    def pending(self, *, limit: int = 100) -> list[tuple[OutboxEntry, str, int]]:
        """Entries in the streams, oldest first, with the consumer holding
        each ('' when not delivered yet) and its idle ms (since it was last
        delivered, or since it entered the stream)."""
        return self.driver.run(self.core.pending(limit))

    def redrive(self, delivery_id: str) -> bool:
        """Move the dead letter ``delivery_id`` back into the outbox with its
        attempts reset to 0 (same delivery id). A delivery id does not name
        its bucket and no index maps it, so this reads the dead-letter
        streams from their oldest entry, 500 per bucket and round trip, at
        most 100 000 per bucket; ``False`` when not found."""
        return self.driver.run(self.core.redrive(delivery_id))

    def redrive_all(self, *, limit: int | None = None) -> int:
        """Move up to ``limit`` dead letters (None: all), oldest first per
        bucket, back into the outbox; returns how many. A dead letter
        without a delivery id stays."""
        return self.driver.run(self.core.redrive_all(limit))

    def purge_dead(self, *, older_than_ms: int, dry_run: bool = False) -> int:
        """Remove the dead letters that died more than ``older_than_ms`` ago
        by the server's clock (``dry_run``: only count them); returns how
        many. Costs what it removes: pages of 500 per bucket."""
        return self.driver.run(self.core.purge_dead(older_than_ms, dry_run))

    def stats(self) -> dict[str, int]:
        """``pending`` (in the streams, delivered or not), ``retrying``,
        ``dead`` and ``lag_ms``: the age since emission of the oldest of
        each stream's first entry and each bucket's next retry (0 when
        empty). One pipelined round trip."""
        return self.driver.run(self.core.stats())
