"""RedisInbox / AsyncRedisInbox: the idempotency inbox on Redis.

Rows are per scope (``{p:b}:in:<scope>`` hashes) in the bucket of the
instance they were used with, with one expiry index per bucket, so
``purge_expired`` costs the number of expired rows and ``forget(scope)``
deletes exact key names (glob characters in a scope are just characters).
Expiry is judged by the Redis server's clock (``TIME``).
"""

from __future__ import annotations

import json
from typing import Any

from django_xsm.persistence.base import validate_key
from django_xsm.persistence.codecs import loads_tagged
from django_xsm.persistence.records import ClaimOutcome, ClaimRequest, InboxMark, InboxRelease

from . import ops
from .client import AsyncDriver, SyncDriver, resolve_async_client, resolve_client
from .core import Cmd, LayoutState, Many, Op
from .ops import Call

__all__ = ["AsyncRedisInbox", "InboxCore", "RedisInbox"]


def _scope(scope: str) -> str:
    # The empty scope (no principal) is allowed; anything else is a key.
    return scope if scope == "" else validate_key(scope, what="scope")


class InboxCore:
    def __init__(self, prefix: str, buckets: int | None) -> None:
        self.state = LayoutState(prefix, buckets)

    def claim(self, request: ClaimRequest) -> Op:
        ops.checked_claim(request)
        layout = yield from self.state.ensure()
        reply = yield ops.claim_call(layout, request)
        return ops.parse_claim(request, reply)

    def _row_keys(self, claim: ClaimRequest) -> Op:
        ops.checked_claim(claim)
        layout = yield from self.state.ensure()
        return (
            [
                layout.inbox(claim.scope, claim.instance_key),
                layout.inbox_expiry(layout.bucket(claim.instance_key)),
            ],
            layout.inbox_field(claim.instance_key, claim.idempotency_key),
        )

    def mark(self, mark: InboxMark) -> Op:
        c = mark.claim
        keys, field = yield from self._row_keys(c)
        receipt = json.dumps(mark.receipt, separators=(",", ":"), ensure_ascii=False)
        reply = yield Call("MARK", keys, [field, c.fingerprint, c.owner, receipt, mark.ttl_ms])
        return bool(int(reply))

    def release(self, release: InboxRelease) -> Op:
        keys, field = yield from self._row_keys(release.claim)
        return bool(int((yield Call("RELEASE", keys, [field, release.claim.owner]))))

    def get(self, scope: str, instance_key: str, idempotency_key: str) -> Op:
        layout = yield from self.state.ensure()
        raw, now = yield Many(
            (
                Cmd(
                    "HGET",
                    (
                        layout.inbox(_scope(scope), instance_key),
                        layout.inbox_field(instance_key, idempotency_key),
                    ),
                ),
                Cmd("TIME", ()),
            )
        )
        if raw is None:
            return None
        try:
            row = json.loads(raw)
            expires = int(row.get("x", 0))
        except (ValueError, TypeError, AttributeError):
            return None  # unreadable: absent, as for claim() and mark()
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        if expires <= now_ms:
            return None
        try:
            receipt = loads_tagged(row["r"]) if row.get("r") else None
        except (ValueError, TypeError):
            receipt = None  # as a duplicate's claim outcome reports it
        return {
            "state": "done" if row.get("s") == "d" else "in_flight",
            "fingerprint": row.get("fp", ""),
            "receipt": receipt,
            "expires_ms": expires,
        }

    def purge_expired(self, limit: int) -> Op:
        layout = yield from self.state.ensure()
        replies = yield Many(
            tuple(
                Call("PURGE_INBOX", [layout.inbox_expiry(b)], [limit])
                for b in range(layout.buckets)
            )
        )
        return sum(int(r) for r in replies)

    def forget(self, scope: str) -> Op:
        layout = yield from self.state.ensure()
        replies = yield Many(
            tuple(
                Call(
                    "FORGET_SCOPE",
                    [layout.inbox_for_bucket(_scope(scope), b), layout.inbox_expiry(b)],
                    [],
                )
                for b in range(layout.buckets)
            )
        )
        return sum(int(r) for r in replies)


class RedisInbox:
    """Idempotency inbox on a blocking client; see InboxStore."""

    def __init__(self, client_or_url: Any, *, prefix: str, buckets: int | None = None) -> None:
        self.client = resolve_client(client_or_url)
        self.prefix = prefix
        self.core = InboxCore(prefix, buckets)
        self.driver = SyncDriver(self.client)

    def claim(self, request: ClaimRequest) -> ClaimOutcome:
        return self.driver.run(self.core.claim(request), request.instance_key)  # type: ignore[no-any-return]

    def mark(self, mark: InboxMark) -> bool:
        return self.driver.run(self.core.mark(mark), mark.claim.instance_key)  # type: ignore[no-any-return]

    def release(self, release: InboxRelease) -> bool:
        return self.driver.run(self.core.release(release), release.claim.instance_key)  # type: ignore[no-any-return]

    def get(self, scope: str, instance_key: str, idempotency_key: str) -> dict[str, Any] | None:
        return self.driver.run(self.core.get(scope, instance_key, idempotency_key), instance_key)  # type: ignore[no-any-return]

    def purge_expired(self, *, limit: int = 1000) -> int:
        """Remove up to ``limit`` expired rows per bucket; returns how many."""
        return self.driver.run(self.core.purge_expired(limit))  # type: ignore[no-any-return]

    def forget(self, scope: str) -> int:
        """Remove every row of ``scope`` (exactly that scope)."""
        return self.driver.run(self.core.forget(scope))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<RedisInbox prefix={self.prefix!r}>"


class AsyncRedisInbox:
    """The asyncio twin of :class:`RedisInbox`."""

    def __init__(self, client_or_url: Any, *, prefix: str, buckets: int | None = None) -> None:
        self.client = resolve_async_client(client_or_url)
        self.prefix = prefix
        self.core = InboxCore(prefix, buckets)
        self.driver = AsyncDriver(self.client)

    async def claim(self, request: ClaimRequest) -> ClaimOutcome:
        return await self.driver.run(self.core.claim(request), request.instance_key)  # type: ignore[no-any-return]

    async def mark(self, mark: InboxMark) -> bool:
        return await self.driver.run(self.core.mark(mark), mark.claim.instance_key)  # type: ignore[no-any-return]

    async def release(self, release: InboxRelease) -> bool:
        return await self.driver.run(self.core.release(release), release.claim.instance_key)  # type: ignore[no-any-return]

    async def get(
        self, scope: str, instance_key: str, idempotency_key: str
    ) -> dict[str, Any] | None:
        return await self.driver.run(
            self.core.get(scope, instance_key, idempotency_key), instance_key
        )  # type: ignore[no-any-return]

    async def purge_expired(self, *, limit: int = 1000) -> int:
        return await self.driver.run(self.core.purge_expired(limit))  # type: ignore[no-any-return]

    async def forget(self, scope: str) -> int:
        return await self.driver.run(self.core.forget(scope))  # type: ignore[no-any-return]
