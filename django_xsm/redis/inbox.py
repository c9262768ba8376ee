"""RedisInbox / AsyncRedisInbox: the idempotency inbox on Redis.

Rows are per scope (``{p:b}:in:<scope>`` hashes) in the bucket of the
instance they were used with, with one expiry index per bucket, so
``purge_expired`` and ``count_expired`` cost the number of expired rows,
``forget(scope)`` deletes exact key names (glob characters in a scope are
just characters) and ``forget_instance(key)`` reads one bucket's index.
Expiry is judged by the Redis server's clock (``TIME``).
"""

from __future__ import annotations

import json
from typing import Any

from django_xsm.persistence.arguments import validate_key, validate_limit
from django_xsm.persistence.base import Codec
from django_xsm.persistence.codecs import JsonCodec, dumps_text, loads_tagged
from django_xsm.persistence.records import (
    ClaimOutcome,
    ClaimRequest,
    ClaimStatus,
    InboxMark,
    InboxRelease,
)
from django_xsm.persistence.sealing import seal_bytes, unseal

from . import calls
from .calls import Call, b2s
from .client import AsyncSide, RedisSide, SyncSide
from .core import Cmd, LayoutState, Many, Op
from .durability import Durability
from .keys import SEP, escape_glob
from .outbox_entries import allocate

__all__ = ["AsyncRedisInbox", "InboxCore", "RedisInbox"]

#: Members a ZSCAN call asks for (a hint to Redis, not a limit).
PAGE = 500


def _scope(scope: str) -> str:
    # The empty scope (no principal) is allowed; anything else is a key.
    return scope if scope == "" else validate_key(scope, what="scope")


class InboxCore:
    """What RedisInbox and AsyncRedisInbox do, minus the sending."""

    def __init__(
        self,
        prefix: str,
        buckets: int | None,
        durability: Durability | None = None,
        codec: Codec | None = None,
    ) -> None:
        self.state = LayoutState(prefix, buckets)
        self.durability = durability or Durability()
        #: Seals stored receipts when it can (the store's codec).
        self.codec: Codec = codec or JsonCodec()

    def claim(self, request: ClaimRequest) -> Op[ClaimOutcome]:
        calls.checked_claim(request)
        layout = yield from self.state.ensure()
        reply = yield calls.claim_call(layout, request)
        outcome = calls.parse_claim(request, reply, self.codec)
        if self.durability and outcome.status == ClaimStatus.DONE:
            # a replay acknowledges the commit it replays (see durability.py)
            yield from self.durability.confirm(layout, request.instance_key)
        return outcome

    def _row_keys(self, claim: ClaimRequest) -> Op[tuple[list[str], str]]:
        calls.checked_claim(claim)
        layout = yield from self.state.ensure()
        keys, args = calls.claim_args(layout, claim)
        return keys, args[0]

    def mark(self, mark: InboxMark) -> Op[bool]:
        c = mark.claim
        keys, field = yield from self._row_keys(c)
        receipt = seal_bytes(self.codec, dumps_text(mark.receipt, "$.receipt"))
        reply = yield Call("MARK", keys, [field, c.fingerprint, c.owner, receipt, mark.ttl_ms])
        return bool(int(reply))

    def release(self, release: InboxRelease) -> Op[bool]:
        keys, field = yield from self._row_keys(release.claim)
        return bool(int((yield Call("RELEASE", keys, [field, release.claim.owner]))))

    def get(self, scope: str, instance_key: str, idempotency_key: str) -> Op[dict[str, Any] | None]:
        layout = yield from self.state.ensure()
        where = (
            layout.inbox(_scope(scope), instance_key),
            layout.inbox_field(instance_key, idempotency_key),
        )
        raw, now = yield Many((Cmd("HGET", where), Cmd("TIME", ())))
        if raw is None:
            return None
        try:
            row = json.loads(raw)
            expires = int(row.get("x", 0))
        except (ValueError, TypeError, AttributeError):
            return None  # unreadable: absent, as for claim() and mark()
        if expires <= calls.time_ms(now):
            return None
        try:
            receipt = loads_tagged(unseal(self.codec, row["r"])) if row.get("r") else None
        except (ValueError, TypeError):
            receipt = None  # as a duplicate's claim outcome reports it
        return {
            "state": "done" if row.get("s") == "d" else "in_flight",
            "fingerprint": row.get("fp", ""),
            "receipt": receipt,
            "expires_ms": expires,
        }

    def count_expired(self) -> Op[int]:
        layout = yield from self.state.ensure()
        # Inclusive, as PURGE_INBOX reads the index (ZRANGEBYSCORE -inf now).
        now_ms = calls.time_ms((yield Cmd("TIME", ())))
        counts = yield Many(
            tuple(
                Cmd("ZCOUNT", (layout.inbox_expiry(b), "-inf", now_ms))
                for b in range(layout.buckets)
            )
        )
        return sum(int(c) for c in counts)

    def purge_expired(self, limit: int | None, batch: int) -> Op[int]:
        validate_limit(limit, optional=True)
        validate_limit(batch, name="batch")
        layout = yield from self.state.ensure()
        active, removed = list(range(layout.buckets)), 0
        while active and (limit is None or removed < limit):
            left = len(active) * batch if limit is None else limit - removed
            asked = allocate(left, dict.fromkeys(active, batch), 0)
            replies = yield Many(
                tuple(Call("PURGE_INBOX", [layout.inbox_expiry(b)], [n]) for b, n in asked.items())
            )
            # A bucket that gave fewer than asked has no expired row left.
            spent = {b for (b, n), got in zip(asked.items(), replies, strict=True) if int(got) < n}
            removed += sum(int(got) for got in replies)
            active = [b for b in active if b not in spent]
        return removed

    def _instance_rows(self, instance_key: str) -> Op[tuple[str, dict[str, tuple[str, str]]]]:
        validate_key(instance_key)
        layout = yield from self.state.ensure()
        index = layout.inbox_expiry(layout.bucket(instance_key))
        # Index members are "<inbox hash> NUL <instance key> NUL <idempotency
        # key>" and no part holds a NUL, so the pattern pins the instance key.
        pattern = f"*{SEP}{escape_glob(instance_key)}{SEP}*"
        rows: dict[str, tuple[str, str]] = {}  # ZSCAN may repeat a member
        cursor: Any = 0
        while True:
            cursor, page = yield Cmd("ZSCAN", (index, cursor, "MATCH", pattern, "COUNT", PAGE))
            for raw, _score in calls.score_pairs(page):
                member = b2s(raw)
                hash_key, _, field = member.partition(SEP)
                if field.partition(SEP)[0] == instance_key:
                    rows[member] = (hash_key, field)
            if int(cursor) == 0:
                return index, rows

    def count_for_instance(self, instance_key: str) -> Op[int]:
        _index, rows = yield from self._instance_rows(instance_key)
        return len(rows)

    def forget_instance(self, instance_key: str) -> Op[int]:
        index, rows = yield from self._instance_rows(instance_key)
        requests: list[Cmd] = []
        for member, (hash_key, field) in rows.items():
            requests += [Cmd("HDEL", (hash_key, field)), Cmd("ZREM", (index, member))]
        replies = yield Many(tuple(requests))  # no rows: no round trip
        return sum(int(r) for r in replies[::2])

    def forget(self, scope: str) -> Op[int]:
        layout = yield from self.state.ensure()
        scope = _scope(scope)
        keys = [
            [layout.inbox_for_bucket(scope, b), layout.inbox_expiry(b)]
            for b in range(layout.buckets)
        ]
        replies = yield Many(tuple(Call("FORGET_SCOPE", k, []) for k in keys))
        return sum(int(r) for r in replies)


class _InboxBase(RedisSide):
    """The constructor shared by both twins. ``min_replicas`` and
    ``replica_timeout_ms`` as for :class:`~django_xsm.redis.RedisStore`: a
    claim that finds its key done (a replay) is refused with
    ``NotDurableError`` until that many replicas have everything the
    primary applied (claims that ride along with a store's open use the
    store's setting). ``codec``: the store's codec; one that encrypts
    (``FernetCodec``) seals the stored receipts (docs/security.md)."""

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str,
        buckets: int | None = None,
        min_replicas: int = 0,
        replica_timeout_ms: int = 100,
        codec: Codec | None = None,
    ) -> None:
        self._connect(client_or_url)
        self.prefix = prefix
        self.core = InboxCore(prefix, buckets, Durability(min_replicas, replica_timeout_ms), codec)

    # --- the operations a persisted block composes (InboxOps): run by the
    # store's driver, whose Redis this inbox shares (shares_commit)

    def claim_op(self, request: ClaimRequest) -> Op[ClaimOutcome]:
        return self.composed(self.core.claim(request), request.instance_key)

    def release_op(self, release: InboxRelease) -> Op[bool]:
        return self.composed(self.core.release(release), release.claim.instance_key)


class RedisInbox(SyncSide, _InboxBase):
    """Idempotency inbox on a blocking client; see InboxStore."""

    def claim(self, request: ClaimRequest) -> ClaimOutcome:
        return self.driver.run(self.core.claim(request), request.instance_key)

    def mark(self, mark: InboxMark) -> bool:
        return self.driver.run(self.core.mark(mark), mark.claim.instance_key)

    def release(self, release: InboxRelease) -> bool:
        return self.driver.run(self.core.release(release), release.claim.instance_key)

    def get(self, scope: str, instance_key: str, idempotency_key: str) -> dict[str, Any] | None:
        return self.driver.run(self.core.get(scope, instance_key, idempotency_key), instance_key)

    def count_expired(self) -> int:
        """Rows whose time is up by the Redis server's clock: what
        ``purge_expired(limit=None)`` would remove now. Read-only; costs of
        this and the methods below: docs/redis.md, "Maintenance"."""
        return self.driver.run(self.core.count_expired())

    def purge_expired(self, *, limit: int | None = 1000, batch: int = 1000) -> int:
        """Remove expired rows, at most ``limit`` in total (None: every
        expired row), in rounds of one ``PURGE_INBOX`` per bucket, each
        removing at most ``batch`` rows; returns how many. Under a limit,
        rows go earliest-expired first within each bucket, not across the
        namespace."""
        return self.driver.run(self.core.purge_expired(limit, batch))

    def count_for_instance(self, instance_key: str) -> int:
        """Rows used with instance ``instance_key`` in every scope (an
        expired row counts until it is purged): what :meth:`forget_instance`
        would delete. Read-only."""
        return self.driver.run(self.core.count_for_instance(instance_key), instance_key)

    def forget_instance(self, instance_key: str) -> int:
        """Delete the rows used with instance ``instance_key`` in every
        scope, expired ones included; returns how many. Rows of any other
        instance stay, even one whose key starts with this one. Not atomic:
        a row claimed for the instance while it runs may survive."""
        return self.driver.run(self.core.forget_instance(instance_key), instance_key)

    def forget(self, scope: str) -> int:
        """Remove every row of ``scope`` (exactly that scope)."""
        return self.driver.run(self.core.forget(scope))


class AsyncRedisInbox(AsyncSide, _InboxBase):
    """The asyncio twin of :class:`RedisInbox`."""

    async def claim(self, request: ClaimRequest) -> ClaimOutcome:
        return await self.driver.run(self.core.claim(request), request.instance_key)

    async def mark(self, mark: InboxMark) -> bool:
        return await self.driver.run(self.core.mark(mark), mark.claim.instance_key)

    async def release(self, release: InboxRelease) -> bool:
        return await self.driver.run(self.core.release(release), release.claim.instance_key)

    async def get(
        self, scope: str, instance_key: str, idempotency_key: str
    ) -> dict[str, Any] | None:
        return await self.driver.run(
            self.core.get(scope, instance_key, idempotency_key), instance_key
        )

    async def count_expired(self) -> int:
        return await self.driver.run(self.core.count_expired())

    async def purge_expired(self, *, limit: int | None = 1000, batch: int = 1000) -> int:
        return await self.driver.run(self.core.purge_expired(limit, batch))

    async def count_for_instance(self, instance_key: str) -> int:
        op = self.core.count_for_instance(instance_key)
        return await self.driver.run(op, instance_key)

    async def forget_instance(self, instance_key: str) -> int:
        op = self.core.forget_instance(instance_key)
        return await self.driver.run(op, instance_key)

    async def forget(self, scope: str) -> int:
        return await self.driver.run(self.core.forget(scope))
