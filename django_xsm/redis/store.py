"""RedisStore: the StateStore contract on Redis (its asyncio twin,
AsyncRedisStore, lives in :mod:`django_xsm.redis.async_store`).

A block's open is one script (lock + claims + load) and its commit is one
script (fences + snapshot + indexes + inbox marks + log records + unlock)
when the inbox and the log share the store's Redis and prefix; otherwise
the commit applies the snapshot first, then the marks, then the log (see
``StateStore.commit``). Both twins run the generators of
:mod:`django_xsm.redis.core`; only the I/O differs.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django_xsm.exceptions import InvalidConfigError, StoreUnavailableError, XsmError
from django_xsm.persistence.base import Codec, after_save, iter_pages, system_clock_ms
from django_xsm.persistence.locks import StoreLock
from django_xsm.persistence.records import (
    CommitResult,
    CommitUnit,
    OpenRequest,
    OpenResult,
    StoredRecord,
    TimerFailure,
)

from .client import SyncDriver, resolve_client, same_server
from .core import StoreCore

__all__ = ["RedisStore", "health_failure", "with_latency"]

DEFAULT_MAX_SNAPSHOT_BYTES = 1024 * 1024


def health_failure(exc: BaseException) -> dict[str, Any]:
    """A failed health check: the reason's class, never its text (redis-py
    puts host:port into connection errors)."""
    reason = getattr(exc, "cause", "") if isinstance(exc, XsmError) else ""
    return {"ok": False, "backend": "redis", "error": reason or type(exc).__name__}


def with_latency(info: dict[str, Any], started: float) -> dict[str, Any]:
    info["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return info


class _StoreBase:
    """Constructor and identity shared by both twins."""

    def __init__(
        self,
        client: Any,
        *,
        prefix: str,
        codec: Codec | None,
        max_snapshot_bytes: int,
        ttl_s: float | None,
        lock_ttl_ms: int,
        buckets: int | None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.core = StoreCore(
            prefix,
            codec=codec,
            max_snapshot_bytes=max_snapshot_bytes,
            ttl_s=ttl_s,
            lock_ttl_ms=lock_ttl_ms,
            buckets=buckets,
        )
        self.codec = self.core.codec
        self.max_snapshot_bytes = max_snapshot_bytes
        self.ttl_s = ttl_s
        self.lock_ttl_ms = lock_ttl_ms
        self.clock = system_clock_ms

    @property
    def layout(self) -> Any:
        """The namespace's KeyLayout (None until the schema marker was read)."""
        return self.core.state.layout

    def shares_commit(self, other: object) -> bool:
        """Inbox or log on the same server and prefix: one-script commits."""
        return (
            getattr(other, "prefix", None) == self.prefix
            and hasattr(other, "core")
            and same_server(getattr(other, "client", None), self.client)
        )

    def _shared(self, inbox: Any, log: Any) -> tuple[bool, bool, int]:
        with_inbox = inbox is None or self.shares_commit(inbox)
        with_log = log is None or self.shares_commit(log)
        maxlen = int(getattr(log, "maxlen", None) or 0) if with_log else 0
        return with_inbox, with_log, maxlen

    def __repr__(self) -> str:
        return f"<{type(self).__name__} prefix={self.prefix!r}>"


class RedisStore(_StoreBase):
    """Instances in Redis (``redis.Redis`` or a URL).

    ``prefix`` names the namespace (required). ``codec``: snapshot codec
    (compact JSON by default). ``max_snapshot_bytes``: encoded size limit.
    ``ttl_s``: idle instances expire after this many seconds (every commit
    renews it). ``lock_ttl_ms``: lease of pessimistic locks and, by default,
    of idempotency claims. ``buckets``: bucket count for a new namespace
    (default 16; an existing namespace keeps its own).
    """

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
            resolve_client(client_or_url),
            prefix=prefix,
            codec=codec,
            max_snapshot_bytes=max_snapshot_bytes,
            ttl_s=ttl_s,
            lock_ttl_ms=lock_ttl_ms,
            buckets=buckets,
        )
        self.driver = SyncDriver(self.client)
        try:
            self.driver.run(self.core.state.ensure())
        except StoreUnavailableError:
            pass  # read on first use; an unreadable marker still raises here

    def load(self, key: str) -> StoredRecord | None:
        return self.driver.run(self.core.load(key), key)  # type: ignore[no-any-return]

    def open(self, request: OpenRequest, *, inbox: Any = None) -> OpenResult:
        if request.claims and not self.shares_commit(inbox):
            raise InvalidConfigError(
                "open() got claims for an inbox that does not share this store",
                path="inbox",
            )
        return self.driver.run(self.core.open(request), request.key)  # type: ignore[no-any-return]

    def commit(self, unit: CommitUnit, *, inbox: Any = None, log: Any = None) -> CommitResult:
        with_inbox, with_log, maxlen = self._shared(inbox, log)
        op = self.core.commit(unit, with_inbox=with_inbox, with_log=with_log, log_maxlen=maxlen)
        result: CommitResult = self.driver.run(op, unit.key)
        if result.replayed:
            return result
        # Separate inbox / log: documented order snapshot, marks, log.
        if not with_inbox:
            with after_save(unit.key, result.version, "inbox"):
                for mark in unit.marks:
                    inbox.mark(mark)
                for release in unit.releases:
                    inbox.release(release)
        if not with_log and unit.log_entries:
            first = 0
            with after_save(unit.key, result.version, "log"):
                for entry in unit.log_entries:
                    seq = log.append_next(unit.key, entry, version=result.version)
                    first = first or seq
            result = CommitResult(result.version, first, result.updated_ms)
        return result

    def save(
        self,
        key: str,
        snapshot: Mapping[str, Any],
        *,
        expected_version: int,
        machine_version: str = "",
        machine_id: str = "",
    ) -> int:
        op = self.core.save_unit(key, snapshot, expected_version, machine_version, machine_id)
        return self.driver.run(op, key)  # type: ignore[no-any-return]

    def acquire_lock(self, key: str, token: str, ttl_ms: int) -> int:
        return self.driver.run(self.core.acquire_lock(key, token, ttl_ms), key)  # type: ignore[no-any-return]

    def release_lock(self, key: str, token: str) -> bool:
        return self.driver.run(self.core.release_lock(key, token), key)  # type: ignore[no-any-return]

    def lock(self, key: str, *, timeout: float = 1.0, ttl_ms: int | None = None) -> StoreLock:
        """``with store.lock(key) as token:`` (see StoreLock)."""
        return StoreLock(self, key, timeout=timeout, ttl_ms=ttl_ms)

    def lock_holder(self, key: str) -> str | None:
        return self.driver.run(self.core.lock_holder(key), key)  # type: ignore[no-any-return]

    def delete(self, key: str) -> bool:
        return self.driver.run(self.core.delete(key), key)  # type: ignore[no-any-return]

    def forget(self, key: str) -> dict[str, int]:
        return self.driver.run(self.core.forget(key), key)  # type: ignore[no-any-return]

    def list_page(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int = 50,
        machine: str | None = None,
        state: str | None = None,
    ) -> tuple[list[str], str]:
        return self.driver.run(self.core.list_page(prefix, after, limit, machine, state))  # type: ignore[no-any-return]

    def list_keys(self, prefix: str = "", *, machine: str | None = None) -> Iterator[str]:
        return iter_pages(self.list_page, prefix, machine)

    def due_keys(
        self, until_wall: float | _dt.datetime, *, limit: int = 100
    ) -> list[tuple[str, int]]:
        return self.driver.run(self.core.due_keys(until_wall, limit))  # type: ignore[no-any-return]

    def record_timer_failure(
        self,
        key: str,
        *,
        expected_version: int,
        failures: Mapping[str, TimerFailure],
        next_due_ms: int | None,
    ) -> bool:
        op = self.core.record_timer_failure(key, expected_version, failures, next_due_ms)
        return self.driver.run(op, key)  # type: ignore[no-any-return]

    def dead_letters(self, *, limit: int = 100) -> list[tuple[str, int]]:
        return self.driver.run(self.core.dead_letters(limit))  # type: ignore[no-any-return]

    def machine_ids(self, keys: Sequence[str]) -> dict[str, str]:
        """Key -> machine id of its stored record, '' for a key with no
        record (or an expired one). One pipelined round trip (``HGET`` of
        the machine field per key; no snapshot is decoded), plus one more
        when some record was committed with an empty machine id: those
        snapshots are loaded to read theirs. No keys: no I/O."""
        return self.driver.run(self.core.machine_ids(keys))  # type: ignore[no-any-return]

    def prune_expired(self, *, limit: int = 1000) -> int:
        """Drop index entries of instances whose ``ttl_s`` ran out; costs
        the number of expired instances."""
        return self.driver.run(self.core.prune_expired(limit))  # type: ignore[no-any-return]

    def health(self) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            info = self.driver.run(self.core.health())
        except Exception as exc:  # health never raises
            return health_failure(exc)
        return with_latency(info, started)
