"""Lock strategies for ``persisted()`` and the conflict-retry helpers
(docs/persistence.md, "Locks").

Every strategy fences the commit on the version loaded at open, so none
can lose an update; they differ in what an attempt waits for. The retry
helpers, given a strategy, ask it which lock each attempt takes
(:meth:`LockStrategy.for_attempt`).
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from django_xsm.brief import brief
from django_xsm.exceptions import ConflictError, InvalidConfigError, LockTimeoutError

from .base import StoreOp, retry_after_seconds

__all__ = [
    "AdaptiveLock",
    "AsyncStoreLock",
    "LockStrategy",
    "OptimisticLock",
    "PessimisticLock",
    "StoreLock",
    "aretry_on_conflict",
    "backoff_delays",
    "retry_on_conflict",
]

T = TypeVar("T")
R = TypeVar("R")


class LockStrategy:
    """Base of the strategies; ``pessimistic`` tells the runtime to lock;
    ``yields_to_holder``: see :class:`OptimisticLock`."""

    pessimistic = False
    yields_to_holder = False
    timeout: float = 0.0
    ttl_ms: int | None = None

    def new_token(self) -> str:
        return secrets.token_hex(16) if self.pessimistic else ""

    def for_attempt(self, attempt: int) -> LockStrategy:
        """The strategy attempt number ``attempt`` (0 first) of a conflict
        retry takes: this one, except for :class:`AdaptiveLock`."""
        return self


class OptimisticLock(LockStrategy):
    """No lock; the commit is a compare-and-set on the loaded version.
    ``yields_to_holder=True``: an open that finds the instance's lock held
    by another writer raises ``ConflictError(reason="lock")`` before the
    body runs (its commit would lose to the holder): the first attempt of
    :class:`AdaptiveLock`."""

    def __init__(self, *, yields_to_holder: bool = False) -> None:
        self.yields_to_holder = yields_to_holder

    def __repr__(self) -> str:
        return (
            "OptimisticLock(yields_to_holder=True)" if self.yields_to_holder else "OptimisticLock()"
        )


#: The longest wait for a busy lock accepted (about 31 years): finite.
_MAX_TIMEOUT_S = 10**9


class PessimisticLock(LockStrategy):
    """Hold the instance's token lock from open to commit.

    ``timeout``: seconds to wait for a busy lock before ``LockTimeoutError``
    (kept short on purpose: contention fails fast). ``ttl_ms``: lease of the
    lock (default: the store's ``lock_ttl_ms``); a holder that outlives it
    loses its commit with ``ConflictError`` rather than overwriting a newer
    holder. Waiters queue: each blocks in ``store.wait_unlocked()`` until
    the holder's release wakes it (Redis wakes the longest waiter first).
    """

    pessimistic = True

    def __init__(self, timeout: float = 1.0, *, ttl_ms: int | None = None) -> None:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 <= timeout <= _MAX_TIMEOUT_S  # also false for NaN
        ):
            raise InvalidConfigError(
                f"timeout must be a number of seconds from 0 to 1e9, got {brief(timeout)}",
                path="timeout",
            )
        if ttl_ms is not None and (
            isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 1 <= ttl_ms <= 10**12
        ):
            raise InvalidConfigError(
                f"ttl_ms must be an int from 1 to 1e12, got {brief(ttl_ms)}", path="ttl_ms"
            )
        self.timeout = float(timeout)
        self.ttl_ms = ttl_ms

    def __repr__(self) -> str:
        return f"PessimisticLock(timeout={self.timeout:g}, ttl_ms={self.ttl_ms})"


class AdaptiveLock(LockStrategy):
    """Optimistic until a conflict, then queue for the lock.

    The first attempt of a conflict retry takes no lock (an uncontended
    write costs no lock round trip) and gives up at open when another
    writer holds the lock (before the body runs: its commit would lose);
    every retry after a conflict takes
    ``PessimisticLock(timeout, ttl_ms=...)``, so on a hot key
    the losers wait in the token lock's queue instead of racing again (and
    writers that meet a held lock at commit conflict and join the queue).
    A block opened with it on its own, outside ``retry_on_conflict(...,
    lock=)``, is optimistic: the choice is made per attempt, by the retry.
    """

    def __init__(self, timeout: float = 1.0, *, ttl_ms: int | None = None) -> None:
        self.queued = PessimisticLock(timeout, ttl_ms=ttl_ms)

    def for_attempt(self, attempt: int) -> LockStrategy:
        return _FIRST_TRY if attempt == 0 else self.queued

    def __repr__(self) -> str:
        return f"AdaptiveLock(timeout={self.queued.timeout:g}, ttl_ms={self.queued.ttl_ms})"


#: The adaptive lock's first attempt: no lock, and a held lock ends the
#: attempt at open (the retry then queues).
_FIRST_TRY = OptimisticLock(yields_to_holder=True)


def backoff_delays(attempts: int, *, base_s: float = 0.01, max_s: float = 0.5) -> list[float]:
    """Full-jitter exponential backoff delays between ``attempts`` tries."""
    return [random.uniform(0, min(max_s, base_s * 2**i)) for i in range(max(attempts - 1, 0))]


def retry_on_conflict(
    fn: Callable[..., T],
    *,
    attempts: int = 5,
    base_s: float = 0.01,
    max_s: float = 0.5,
    retry_on: tuple[type[BaseException], ...] = (ConflictError,),
    lock: LockStrategy | None = None,
) -> T:
    """Call ``fn`` until it does not raise ``ConflictError`` (at most
    ``attempts`` times), sleeping with jittered exponential backoff.

    ``fn`` must open its own ``persisted()`` block so each attempt reloads.
    Actions run again on every attempt: keep side effects idempotent or
    trigger them after the commit. The last conflict is re-raised with
    ``attempts`` set (and said in its message).

    Without ``lock``, ``fn`` takes no argument. With ``lock``, ``fn`` is
    called with the strategy of each attempt,
    ``lock.for_attempt(n)``, to open its block with (an
    :class:`AdaptiveLock` answers optimistic first, the queueing lock after
    a conflict); an attempt that queues for the lock is not also delayed.
    """
    delays = backoff_delays(attempts, base_s=base_s, max_s=max_s)
    last = len(delays)
    for n, delay in enumerate(delays):
        try:  # called here, not through a helper: one frame less under the view
            return fn() if lock is None else fn(lock.for_attempt(n))
        except retry_on:
            time.sleep(_pause(delay, lock, n + 1))
    try:
        return fn() if lock is None else fn(lock.for_attempt(last))
    except ConflictError as exc:
        raise _gave_up(exc, last + 1) from exc


async def aretry_on_conflict(
    fn: Callable[..., Awaitable[T]],
    *,
    attempts: int = 5,
    base_s: float = 0.01,
    max_s: float = 0.5,
    retry_on: tuple[type[BaseException], ...] = (ConflictError,),
    lock: LockStrategy | None = None,
) -> T:
    """The asyncio twin of :func:`retry_on_conflict`."""
    import asyncio  # deferred: asyncio costs ~20 ms to import

    delays = backoff_delays(attempts, base_s=base_s, max_s=max_s)
    last = len(delays)
    for n, delay in enumerate(delays):
        try:
            return await (fn() if lock is None else fn(lock.for_attempt(n)))
        except retry_on:
            await asyncio.sleep(_pause(delay, lock, n + 1))
    try:
        return await (fn() if lock is None else fn(lock.for_attempt(last)))
    except ConflictError as exc:
        raise _gave_up(exc, last + 1) from exc


def _pause(delay: float, lock: LockStrategy | None, attempt: int) -> float:
    """The backoff before attempt ``attempt``: none when it queues for the
    lock (its wait is the queue)."""
    return 0.0 if lock is not None and lock.for_attempt(attempt).pessimistic else delay


def _gave_up(exc: ConflictError, attempts: int) -> ConflictError:
    """``exc`` once more, saying how many attempts were made."""
    return ConflictError(
        exc.key or "",
        expected=exc.expected,
        actual=exc.actual,
        reason=exc.reason,
        retry_after_s=exc.retry_after_s,
        held_lock=exc.held_lock,
        attempts=attempts,
    )


def queue_for_lock(
    store: Any,
    key: str,
    timeout: float,
    attempt: Callable[[], StoreOp[R]],
    busy_ms_of: Callable[[R], int],
    on_busy: Callable[[int], None] | None = None,
) -> StoreOp[R]:
    """The one lock-acquire loop, as a store operation (a pessimistic
    block's open and :class:`StoreLock` run it): ``attempt()`` until
    ``busy_ms_of`` its result is 0, waiting in the key's queue
    (``store.wait_unlocked_op``) between tries for at most what the
    holder's lease has left, then ``LockTimeoutError`` after ``timeout``
    seconds. ``on_busy(busy_ms)`` observes each busy try."""
    deadline = time.monotonic() + timeout
    while True:
        result = yield from attempt()
        busy_ms = busy_ms_of(result)
        if not busy_ms:
            return result
        if on_busy is not None:
            on_busy(busy_ms)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LockTimeoutError(key, timeout=timeout, retry_after_s=retry_after_seconds(busy_ms))
        yield from store.wait_unlocked_op(key, min(remaining, busy_ms / 1000))


class StoreLock:
    """``with store.lock(key, timeout=1.0) as token:`` — the store's token
    lock on its own (SET NX PX semantics, compare-and-delete release).

    Raises ``LockTimeoutError`` when still busy after ``timeout`` seconds.
    ``token`` is the fencing token to pass to commits made while holding it.
    """

    def __init__(
        self,
        store: Any,
        key: str,
        *,
        timeout: float = 1.0,
        ttl_ms: int | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self.timeout = timeout
        self.ttl_ms = ttl_ms or store.lock_ttl_ms
        self.token = secrets.token_hex(16)

    def _acquire_op(self) -> StoreOp[str]:
        yield from queue_for_lock(
            self.store,
            self.key,
            self.timeout,
            lambda: self.store.acquire_lock_op(self.key, self.token, self.ttl_ms),
            int,
        )
        return self.token

    def acquire(self) -> str:
        token: str = self.store.driver.run(self._acquire_op(), self.key)
        return token

    def release(self) -> bool:
        return bool(self.store.release_lock(self.key, self.token))

    def __enter__(self) -> str:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class AsyncStoreLock(StoreLock):
    """``async with store.lock(key, timeout=1.0) as token:`` — the asyncio
    twin of :class:`StoreLock` (same token lock, same semantics) for
    ``AsyncRedisStore``."""

    async def acquire_async(self) -> str:
        token: str = await self.store.driver.run(self._acquire_op(), self.key)
        return token

    async def release_async(self) -> bool:
        return bool(await self.store.release_lock(self.key, self.token))

    async def __aenter__(self) -> str:
        return await self.acquire_async()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release_async()

    def __enter__(self) -> str:
        raise TypeError("AsyncRedisStore.lock() is an async context manager: use 'async with'")
