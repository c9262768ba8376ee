"""AsyncRedisStore: the asyncio twin of :class:`~django_xsm.redis.RedisStore`.

Same layout, same scripts, same arguments and the same methods, awaitable;
both run the generators of :mod:`django_xsm.redis.core`, so only the I/O
differs. The schema marker is read on first use (a constructor cannot
await).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.base import Codec, after_save
from django_xsm.persistence.records import (
    CommitResult,
    CommitUnit,
    OpenRequest,
    OpenResult,
    StoredRecord,
    TimerFailure,
)

from .client import AsyncDriver, resolve_async_client
from .store import DEFAULT_MAX_SNAPSHOT_BYTES, _StoreBase, health_failure, with_latency

__all__ = ["AsyncRedisStore"]


class AsyncRedisStore(_StoreBase):
    """Instances in Redis through ``redis.asyncio`` (a client or a URL);
    arguments as for :class:`~django_xsm.redis.RedisStore`."""

    def __init__(
        self,
        client_or_url: Any,
        *,
        prefix: str,
        codec: Codec | None = None,
        max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES,
        ttl_s: float | None = None,
        lock_ttl_ms: int = 30_000,
        buckets: int | None = None,
    ) -> None:
        super().__init__(
            resolve_async_client(client_or_url),
            prefix=prefix,
            codec=codec,
            max_snapshot_bytes=max_snapshot_bytes,
            ttl_s=ttl_s,
            lock_ttl_ms=lock_ttl_ms,
            buckets=buckets,
        )
        self.driver = AsyncDriver(self.client)

    async def load(self, key: str) -> StoredRecord | None:
        return await self.driver.run(self.core.load(key), key)  # type: ignore[no-any-return]

    async def open(self, request: OpenRequest, *, inbox: Any = None) -> OpenResult:
        if request.claims and not self.shares_commit(inbox):
            raise InvalidConfigError(
                "open() got claims for an inbox that does not share this store",
                path="inbox",
            )
        return await self.driver.run(self.core.open(request), request.key)  # type: ignore[no-any-return]

    async def commit(self, unit: CommitUnit, *, inbox: Any = None, log: Any = None) -> CommitResult:
        with_inbox, with_log, maxlen = self._shared(inbox, log)
        op = self.core.commit(unit, with_inbox=with_inbox, with_log=with_log, log_maxlen=maxlen)
        result: CommitResult = await self.driver.run(op, unit.key)
        if result.replayed:
            return result
        # Separate inbox / log: documented order snapshot, marks, log.
        if not with_inbox:
            with after_save(unit.key, result.version, "inbox"):
                for mark in unit.marks:
                    await inbox.mark(mark)
                for release in unit.releases:
                    await inbox.release(release)
        if not with_log and unit.log_entries:
            first = 0
            with after_save(unit.key, result.version, "log"):
                for entry in unit.log_entries:
                    seq = await log.append_next(unit.key, entry, version=result.version)
                    first = first or seq
            result = CommitResult(result.version, first, result.updated_ms)
        return result

    async def save(
        self,
        key: str,
        snapshot: Mapping[str, Any],
        *,
        expected_version: int,
        machine_version: str = "",
        machine_id: str = "",
    ) -> int:
        op = self.core.save_unit(key, snapshot, expected_version, machine_version, machine_id)
        return await self.driver.run(op, key)  # type: ignore[no-any-return]

    async def acquire_lock(self, key: str, token: str, ttl_ms: int) -> int:
        return await self.driver.run(self.core.acquire_lock(key, token, ttl_ms), key)  # type: ignore[no-any-return]

    async def release_lock(self, key: str, token: str) -> bool:
        return await self.driver.run(self.core.release_lock(key, token), key)  # type: ignore[no-any-return]

    async def lock_holder(self, key: str) -> str | None:
        return await self.driver.run(self.core.lock_holder(key), key)  # type: ignore[no-any-return]

    async def delete(self, key: str) -> bool:
        return await self.driver.run(self.core.delete(key), key)  # type: ignore[no-any-return]

    async def forget(self, key: str) -> dict[str, int]:
        return await self.driver.run(self.core.forget(key), key)  # type: ignore[no-any-return]

    async def list_page(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int = 50,
        machine: str | None = None,
        state: str | None = None,
    ) -> tuple[list[str], str]:
        op = self.core.list_page(prefix, after, limit, machine, state)
        return await self.driver.run(op)  # type: ignore[no-any-return]

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

    async def due_keys(
        self, until_wall: float | _dt.datetime, *, limit: int = 100
    ) -> list[tuple[str, int]]:
        return await self.driver.run(self.core.due_keys(until_wall, limit))  # type: ignore[no-any-return]

    async def record_timer_failure(
        self,
        key: str,
        *,
        expected_version: int,
        failures: Mapping[str, TimerFailure],
        next_due_ms: int | None,
    ) -> bool:
        op = self.core.record_timer_failure(key, expected_version, failures, next_due_ms)
        return await self.driver.run(op, key)  # type: ignore[no-any-return]

    async def dead_letters(self, *, limit: int = 100) -> list[tuple[str, int]]:
        return await self.driver.run(self.core.dead_letters(limit))  # type: ignore[no-any-return]

    async def machine_ids(self, keys: Sequence[str]) -> dict[str, str]:
        return await self.driver.run(self.core.machine_ids(keys))  # type: ignore[no-any-return]

    async def prune_expired(self, *, limit: int = 1000) -> int:
        return await self.driver.run(self.core.prune_expired(limit))  # type: ignore[no-any-return]

    async def health(self) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            info = await self.driver.run(self.core.health())
        except Exception as exc:  # health never raises
            return health_failure(exc)
        return with_latency(info, started)

    async def aclose(self) -> None:
        """Close the client's connections (for clients built from a URL)."""
        await self.client.aclose()
