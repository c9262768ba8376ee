"""RedisStore: the StateStore contract on Redis (its asyncio twin,
AsyncRedisStore, lives in :mod:`django_xsm.redis.async_store`).

A block's open is one script (lock + claims + load) and its commit is one
script (fences + snapshot + indexes + inbox marks + log records + unlock);
the inbox and the log must share the store's Redis and prefix
(:meth:`_StoreBase.shares_commit`). Both twins run the generators of
:mod:`django_xsm.redis.core`; only the I/O differs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django_xsm.exceptions import StoreAuthenticationError, XsmError
from django_xsm.persistence import records
from django_xsm.persistence.arguments import (
    StoreKeywords,
    validate_maxlen,
    validate_positive_int,
    validate_ttl_s,
)
from django_xsm.persistence.base import Codec, iter_pages, require_shared_commit, system_clock_ms
from django_xsm.persistence.locks import StoreLock

from .client import AsyncSide, RedisSide, SyncSide, is_cluster, same_server, socket_timeout_of
from .core import Op, StoreCore, ttl_ms_of
from .inbox import RedisInbox
from .keys import KeyLayout
from .log import RedisLog
from .outbox import RedisOutbox

__all__ = ["RedisStore", "health_failure", "with_latency"]

DEFAULT_MAX_SNAPSHOT_BYTES = 1024 * 1024


def health_failure(exc: BaseException) -> dict[str, Any]:
    """A failed health check: the reason's class, never its text (redis-py
    puts host:port into connection errors)."""
    reason = getattr(exc, "cause", "") if isinstance(exc, XsmError) else ""
    info: dict[str, Any] = {"ok": False, "backend": "redis", "error": reason or type(exc).__name__}
    if isinstance(exc, StoreAuthenticationError):
        info["credentials_refused"] = True  # a configuration problem, not an outage
    return info


def with_latency(info: dict[str, Any], started: float) -> dict[str, Any]:
    info["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return info


class _StoreBase(RedisSide):
    """Constructor and identity shared by both twins (docs/redis.md).

    ``prefix`` names the namespace (required). ``codec``: snapshot codec
    (compact JSON by default). ``max_snapshot_bytes``: encoded size limit.
    ``ttl_s``: idle instances expire after this many seconds (every commit
    renews it). ``lock_ttl_ms``: lease of pessimistic locks and, by default,
    of idempotency claims. ``buckets``: bucket count for a new namespace
    (default 16; an existing namespace keeps its own). ``min_replicas``:
    when above 0, a commit (or a replay of one) fewer replicas acknowledged
    within ``replica_timeout_ms`` raises ``NotDurableError``.
    ``log_maxlen``: the approximate cap of each stream of :attr:`log`.

    The store is the whole backend: its ``inbox``, ``log`` and, on the
    blocking twin, ``outbox`` are on the same client, prefix, buckets and
    codec, so a block's commit writes them in its one script. Construction
    does no I/O: the schema marker is read on first use.
    """

    inbox: Any
    log: Any
    #: the classes of this twin's ``inbox`` and ``log``
    _part_kinds: tuple[type[Any], type[Any]]

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
        min_replicas: int = 0,
        replica_timeout_ms: int = 100,
        log_maxlen: int | None = None,
    ) -> None:
        self._connect(client_or_url)
        self.prefix = prefix
        self.core = StoreCore(
            prefix,
            codec=codec,
            max_snapshot_bytes=max_snapshot_bytes,
            ttl_s=ttl_s,
            lock_ttl_ms=lock_ttl_ms,
            buckets=buckets,
            min_replicas=min_replicas,
            replica_timeout_ms=replica_timeout_ms,
        )
        self.core.per_bucket_health = is_cluster(self.client)
        timeout = socket_timeout_of(self.client)
        if timeout is not None:
            self.core.wait_slice_s = min(self.core.wait_slice_s, timeout / 2)
        self.codec = self.core.codec
        self._ttl_s = ttl_s
        self.clock = system_clock_ms
        validate_maxlen(log_maxlen, "log_maxlen")
        self._attach_parts(buckets, log_maxlen)

    def _attach_parts(self, buckets: int | None, log_maxlen: int | None) -> None:
        """Build this twin's ``inbox`` and ``log`` (its ``_part_kinds``) on
        the store's client, prefix, codec and durability (no I/O)."""
        inbox_kind, log_kind = self._part_kinds
        self.inbox = inbox_kind(
            self.client,
            prefix=self.prefix,
            buckets=buckets,
            codec=self.codec,
            min_replicas=self.min_replicas,
            replica_timeout_ms=self.replica_timeout_ms,
        )
        self.log = log_kind(
            self.client, prefix=self.prefix, buckets=buckets, codec=self.codec, maxlen=log_maxlen
        )

    @property
    def max_snapshot_bytes(self) -> int:
        """The encoded snapshot limit, on save and on load."""
        return self.core.max_snapshot_bytes

    @max_snapshot_bytes.setter
    def max_snapshot_bytes(self, value: int) -> None:
        self.core.max_snapshot_bytes = validate_positive_int(value, "max_snapshot_bytes")

    @property
    def ttl_s(self) -> float | None:
        """Idle expiry of instances (None: never), renewed by every commit."""
        return self._ttl_s

    @ttl_s.setter
    def ttl_s(self, value: float | None) -> None:
        self.core.ttl_ms = ttl_ms_of(value)
        self._ttl_s = validate_ttl_s(value)

    @property
    def lock_ttl_ms(self) -> int:
        """Lease of pessimistic locks (and, by default, of idempotency claims)."""
        return self.core.lock_ttl_ms

    @lock_ttl_ms.setter
    def lock_ttl_ms(self, value: int) -> None:
        self.core.lock_ttl_ms = validate_positive_int(value, "lock_ttl_ms")

    @property
    def min_replicas(self) -> int:
        """Replicas every commit waits for (0: none, Redis' asynchronous default)."""
        return self.core.durability.min_replicas

    @property
    def replica_timeout_ms(self) -> int:
        """How long a commit waits for :attr:`min_replicas`."""
        return self.core.durability.timeout_ms

    @property
    def namespace_reset(self) -> bool:
        """True once this store saw the namespace's schema marker recreated
        with another id (Redis lost its data); ``health()`` checks it."""
        return self.core.state.reset

    @property
    def layout(self) -> KeyLayout | None:
        """The namespace's KeyLayout (None until the schema marker was read)."""
        return self.core.state.layout

    def shares_commit(self, other: object) -> bool:
        """Inbox or log on the same server, prefix and client kind: the
        only ones a commit (one script) can write."""
        return (
            isinstance(other, SyncSide | AsyncSide)
            and other.prefix == self.prefix
            and same_server(other.client, self.client)
        )

    # --- the operations a persisted block composes (StoreOps) -------------

    def open_op(self, request: records.OpenRequest) -> Op[records.OpenResult]:
        return self.composed(self.core.open(request), request.key)

    def commit_op(
        self, unit: records.CommitUnit, *, log: object = None
    ) -> Op[records.CommitResult]:
        log = self.log if log is None else log  # its maxlen trims the streams
        return self.composed(self.core.commit(unit, log=log), unit.key)

    def acquire_lock_op(self, key: str, token: str, ttl_ms: int) -> Op[int]:
        return self.composed(self.core.acquire_lock(key, token, ttl_ms), key)

    def release_lock_op(self, key: str, token: str) -> Op[bool]:
        return self.composed(self.core.release_lock(key, token), key)

    def wait_unlocked_op(self, key: str, seconds: float) -> Op[bool]:
        return self.composed(self.core.wait_unlocked(key, seconds), key)


class RedisStore(
    SyncSide, _StoreBase, StoreKeywords[tuple[list[str], str], list[tuple[str, int]], bool]
):
    """Instances in Redis (``redis.Redis`` or a URL); arguments as for the
    shared base above."""

    inbox: RedisInbox
    log: RedisLog
    outbox: RedisOutbox

    _part_kinds = (RedisInbox, RedisLog)

    def _attach_parts(self, buckets: int | None, log_maxlen: int | None) -> None:
        super()._attach_parts(buckets, log_maxlen)
        self.outbox = RedisOutbox(
            self.client, prefix=self.prefix, buckets=buckets, codec=self.codec
        )

    def load(self, key: str) -> records.StoredRecord | None:
        return self.driver.run(self.core.load(key), key)

    def open(self, request: records.OpenRequest, *, inbox: object = None) -> records.OpenResult:
        require_shared_commit(self, inbox=inbox)
        return self.driver.run(self.open_op(request), request.key)

    def commit(
        self, unit: records.CommitUnit, *, inbox: Any = None, log: Any = None
    ) -> records.CommitResult:
        require_shared_commit(self, inbox=inbox, log=log)
        return self.driver.run(self.commit_op(unit, log=log), unit.key)

    def save(self, key: str, snapshot: Mapping[str, Any], *, expected_version: int) -> int:
        op = self.core.save_unit(key, snapshot, expected_version)
        return self.driver.run(op, key)

    def acquire_lock(self, key: str, token: str, ttl_ms: int) -> int:
        return self.driver.run(self.core.acquire_lock(key, token, ttl_ms), key)

    def release_lock(self, key: str, token: str) -> bool:
        return self.driver.run(self.core.release_lock(key, token), key)

    def wait_unlocked(self, key: str, seconds: float) -> bool:
        """Wait until a release of ``key``'s lock wakes us, at most ``seconds``
        (in slices of at most 250 ms); True when woken. Waiters are woken
        one per release, longest waiting first."""
        return self.driver.run(self.core.wait_unlocked(key, seconds), key)

    def lock(self, key: str, *, timeout: float = 1.0, ttl_ms: int | None = None) -> StoreLock:
        """``with store.lock(key) as token:`` (see StoreLock)."""
        return StoreLock(self, key, timeout=timeout, ttl_ms=ttl_ms)

    def lock_holder(self, key: str) -> str | None:
        return self.driver.run(self.core.lock_holder(key), key)

    def delete(self, key: str) -> bool:
        return self.driver.run(self.core.delete(key), key)

    def forget(self, key: str) -> dict[str, int]:
        return self.driver.run(self.core.forget(key), key)

    def _list_page(
        self, prefix: str, after: str, limit: int, machine: str | None, state: str | None
    ) -> tuple[list[str], str]:
        return self.driver.run(self.core.list_page(prefix, after, limit, machine, state))

    def list_keys(self, prefix: str = "", *, machine: str | None = None) -> Iterator[str]:
        return iter_pages(self.list_page, prefix, machine)

    def _due_keys(self, until_ms: int, limit: int, prefix: str) -> list[tuple[str, int]]:
        return self.driver.run(self.core.due_keys(until_ms, limit, prefix))

    def _record_timer_failure(
        self, key: str, expected: int, failures: records.TimerFailures, due_ms: int | None
    ) -> bool:
        op = self.core.record_timer_failure(key, expected, failures, due_ms)
        return self.driver.run(op, key)

    def dead_letters(self, *, limit: int = 100) -> list[tuple[str, int]]:
        return self.driver.run(self.core.dead_letters(limit))

    def park(self, key: str, *, reason: str) -> bool:
        """Dead-letter a record that cannot be read (see StateStore.park)."""
        return self.driver.run(self.core.park(key, reason), key)

    def dead_letter_reasons(self, keys: Sequence[str]) -> dict[str, str]:
        """Key -> why it is dead-lettered (one pipelined round trip)."""
        return self.driver.run(self.core.dead_letter_reasons(keys))

    def upgrade_layout(self) -> tuple[int, int]:
        """Upgrade the namespace's key layout to this version's (see
        docs/redis.md, "Layout versions"): (layout before, after)."""
        return self.driver.run(self.core.upgrade_layout())

    def persists_data(self) -> bool | None:
        """True when the server writes its data to disk (``appendonly yes``
        or a ``save`` schedule), False when a restart loses everything,
        None when ``CONFIG GET`` is not allowed (renamed, or the ACL)."""
        return self.driver.run(self.core.persists_data())

    def machine_ids(self, keys: Sequence[str]) -> dict[str, str]:
        """Key -> machine id of its stored record, '' for a key with no
        record (or an expired one). No snapshot is decoded unless a record
        was committed with an empty machine id. No keys: no I/O."""
        return self.driver.run(self.core.machine_ids(keys))

    def prune_expired(self, *, limit: int = 1000) -> int:
        """Drop index entries of instances whose ``ttl_s`` ran out; costs
        the number of expired instances."""
        return self.driver.run(self.core.prune_expired(limit))

    def health(self) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            info = self.driver.run(self.core.health())
        except Exception as exc:  # health never raises
            return health_failure(exc)
        return with_latency(info, started)
