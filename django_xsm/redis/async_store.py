"""AsyncRedisStore: the asyncio twin of :class:`~django_xsm.redis.RedisStore`.

Same layout, same scripts, same arguments and the same methods, awaitable;
both run the generators of :mod:`django_xsm.redis.core`, so only the I/O
differs. The schema marker is read on first use (a constructor cannot
await).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

from django_xsm.persistence import records
from django_xsm.persistence.arguments import StoreKeywords
from django_xsm.persistence.base import require_shared_commit
from django_xsm.persistence.locks import AsyncStoreLock

from .client import AsyncSide
from .inbox import AsyncRedisInbox
from .log import AsyncRedisLog
from .store import _StoreBase, health_failure, with_latency

__all__ = ["AsyncRedisStore"]


class AsyncRedisStore(
    AsyncSide,
    _StoreBase,
    StoreKeywords[
        Awaitable[tuple[list[str], str]], Awaitable[list[tuple[str, int]]], Awaitable[bool]
    ],
):
    """Instances in Redis through ``redis.asyncio`` (a client or a URL);
    arguments as for :class:`~django_xsm.redis.RedisStore`. Its parts are
    the asyncio ``inbox`` and ``log``; the outbox's delivery side is
    read by synchronous workers (``RedisStore.outbox``)."""

    inbox: AsyncRedisInbox
    log: AsyncRedisLog

    _part_kinds = (AsyncRedisInbox, AsyncRedisLog)

    async def load(self, key: str) -> records.StoredRecord | None:
        return await self.driver.run(self.core.load(key), key)

    async def open(
        self, request: records.OpenRequest, *, inbox: object = None
    ) -> records.OpenResult:
        require_shared_commit(self, inbox=inbox)
        return await self.driver.run(self.open_op(request), request.key)

    async def commit(
        self, unit: records.CommitUnit, *, inbox: Any = None, log: Any = None
    ) -> records.CommitResult:
        require_shared_commit(self, inbox=inbox, log=log)
        return await self.driver.run(self.commit_op(unit, log=log), unit.key)

    async def save(self, key: str, snapshot: Mapping[str, Any], *, expected_version: int) -> int:
        op = self.core.save_unit(key, snapshot, expected_version)
        return await self.driver.run(op, key)

    async def acquire_lock(self, key: str, token: str, ttl_ms: int) -> int:
        return await self.driver.run(self.core.acquire_lock(key, token, ttl_ms), key)

    async def release_lock(self, key: str, token: str) -> bool:
        return await self.driver.run(self.core.release_lock(key, token), key)

    async def wait_unlocked(self, key: str, seconds: float) -> bool:
        """The asyncio twin of :meth:`RedisStore.wait_unlocked`."""
        return await self.driver.run(self.core.wait_unlocked(key, seconds), key)

    def lock(self, key: str, *, timeout: float = 1.0, ttl_ms: int | None = None) -> AsyncStoreLock:
        """``async with store.lock(key) as token:`` (see AsyncStoreLock)."""
        return AsyncStoreLock(self, key, timeout=timeout, ttl_ms=ttl_ms)

    async def lock_holder(self, key: str) -> str | None:
        return await self.driver.run(self.core.lock_holder(key), key)

    async def delete(self, key: str) -> bool:
        return await self.driver.run(self.core.delete(key), key)

    async def forget(self, key: str) -> dict[str, int]:
        return await self.driver.run(self.core.forget(key), key)

    async def _list_page(
        self, prefix: str, after: str, limit: int, machine: str | None, state: str | None
    ) -> tuple[list[str], str]:
        op = self.core.list_page(prefix, after, limit, machine, state)
        return await self.driver.run(op)

    async def list_keys(
        self, prefix: str = "", *, machine: str | None = None
    ) -> AsyncIterator[str]:
        """``async for key in store.list_keys(prefix):`` (paged internally)."""
        after = ""
        while True:
            page, after = await self.list_page(prefix, after=after, limit=500, machine=machine)
            for key in page:
                yield key
            if not after:
                return

    async def _due_keys(self, until_ms: int, limit: int, prefix: str) -> list[tuple[str, int]]:
        return await self.driver.run(self.core.due_keys(until_ms, limit, prefix))

    async def _record_timer_failure(
        self, key: str, expected: int, failures: records.TimerFailures, due_ms: int | None
    ) -> bool:
        op = self.core.record_timer_failure(key, expected, failures, due_ms)
        return await self.driver.run(op, key)

    async def dead_letters(self, *, limit: int = 100) -> list[tuple[str, int]]:
        return await self.driver.run(self.core.dead_letters(limit))

    async def park(self, key: str, *, reason: str) -> bool:
        return await self.driver.run(self.core.park(key, reason), key)

    async def dead_letter_reasons(self, keys: Sequence[str]) -> dict[str, str]:
        return await self.driver.run(self.core.dead_letter_reasons(keys))

    async def upgrade_layout(self) -> tuple[int, int]:
        return await self.driver.run(self.core.upgrade_layout())

    async def persists_data(self) -> bool | None:
        return await self.driver.run(self.core.persists_data())

    async def machine_ids(self, keys: Sequence[str]) -> dict[str, str]:
        return await self.driver.run(self.core.machine_ids(keys))

    async def prune_expired(self, *, limit: int = 1000) -> int:
        return await self.driver.run(self.core.prune_expired(limit))

    async def health(self) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            info = await self.driver.run(self.core.health())
        except Exception as exc:  # health never raises
            return health_failure(exc)
        return with_latency(info, started)

    async def aclose(self) -> None:
        """Close the client's connections (for clients built from a URL)."""
        await self.driver.aclose_nodes()
        await self.client.aclose()
