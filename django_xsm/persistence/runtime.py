"""persisted() / apersisted(): load, let the body send events, commit once.

::

    with persisted(store, "order:42", machine, plugins=plugins) as order:
        order.send("PAY", idempotency_key="evt_1", actor="alice")

Round trips (Redis, inbox and log on the store's client and prefix): one to
open (lock + claims known at open + load) and one to commit (fences +
snapshot + deadlines + marks + log + unlock). A ``send()`` whose idempotency
key was not known at open adds one claim round trip. A block that changed
nothing writes nothing (a held lock is released, unfinished claims are
dropped). An exception in the body writes nothing and releases claims and
the lock.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from django_xsm.exceptions import (
    InvalidConfigError,
    LockTimeoutError,
    PartialCommitError,
    XsmError,
)

from .base import retry_after_seconds
from .block import PersistedInstance
from .claims import SendClaim
from .idempotency import ReplayedReceipt
from .locks import LockStrategy
from .records import ClaimOutcome, ClaimRequest, CommitResult, CommitUnit, InboxRelease, OpenResult

__all__ = ["apersisted", "persisted"]


def _require_async(obj: Any, method: str, what: str, wanted: str) -> None:
    if not inspect.iscoroutinefunction(getattr(obj, method, None)):
        raise InvalidConfigError(
            f"apersisted() needs {wanted}, got {type(obj).__name__}",
            path=what,
            hint="use persisted() with sync backends, or the async twin of this one",
        )


def _lock_timeout(block: PersistedInstance, busy_ms: int) -> LockTimeoutError:
    return LockTimeoutError(
        block.key, timeout=block.lock.timeout, retry_after_s=retry_after_seconds(busy_ms)
    )


class _Common:
    def __init__(
        self,
        store: Any,
        key: str,
        machine: Any,
        *,
        plugins: Any = (),
        lock: LockStrategy | None = None,
        create: bool = True,
        strict: bool = False,
        actor: str = "",
        correlation_id: str = "",
        idempotency_key: str | None = None,
        fingerprint: str = "",
        principal: str = "",
        context: Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
        is_async: bool = False,
    ) -> None:
        self.block = PersistedInstance(
            store=store,
            key=key,
            machine=machine,
            plugins=tuple(plugins or ()),
            lock=lock,
            create=create,
            strict=strict,
            actor=actor,
            correlation_id=correlation_id,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
            principal=principal,
            context=context,
            clock=clock,
            is_async=is_async,
        )
        self.store = store
        idem = self.block.idempotency
        self.inbox = idem.inbox if idem is not None else None
        self.log = self.block.audit.log if self.block.audit is not None else None
        self.claims_in_open = self.inbox is not None and store.shares_commit(self.inbox)


class persisted(_Common):
    """Context manager around one instance; see the module docstring.

    ``create=False`` raises ``InstanceNotFoundError`` for a missing key.
    ``idempotency_key`` (with ``fingerprint`` and ``principal``) claims a key
    for the whole block at open; ``strict=True`` makes every send raise
    ``EventNotAcceptedError`` when no transition is taken.
    """

    def __enter__(self) -> PersistedInstance:
        block = self.block
        try:
            if not self.claims_in_open and block.block_claim is not None:
                assert self.inbox is not None
                block.on_block_claim(self.inbox.claim(block.block_claim))
            block.on_opened(self._open())
        except BaseException:
            # Whatever failed (a lost reply included), nothing of ours may
            # outlive the failed open: drop the claim and the lock we may hold.
            self._abort()
            raise
        block.driver = self
        return block

    def _open(self) -> OpenResult:
        block = self.block
        deadline = time.monotonic() + block.lock.timeout
        while True:
            if self.claims_in_open:
                result: OpenResult = self.store.open(
                    block.open_request(with_claims=True), inbox=self.inbox
                )
            else:
                result = self.store.open(block.open_request(with_claims=False))
            if not result.lock_busy_ms or not block.lock.pessimistic:
                return result
            if time.monotonic() >= deadline:
                raise _lock_timeout(block, result.lock_busy_ms)
            time.sleep(min(block.lock.poll_s * 2, max(deadline - time.monotonic(), 0)))

    def send(
        self,
        event: Any,
        /,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
        reason: str = "",
        correlation_id: str | None = None,
        strict: bool | None = None,
        **payload: Any,
    ) -> Any:
        block = self.block
        etype, data, step = block.prepare_send(event, payload, idempotency_key)
        claim: SendClaim | None = None
        if isinstance(step, ReplayedReceipt):
            return step
        if step is not None:
            got = block.on_send_claim(self._claim(step))
            if isinstance(got, ReplayedReceipt):
                return got
            claim = got
        return block.run(
            etype,
            data,
            claim,
            actor=actor,
            reason=reason,
            correlation_id=correlation_id,
            strict=strict,
        )

    async def asend(self, event: Any, /, **kwargs: Any) -> Any:
        """Same as :meth:`send` (a sync block's I/O is blocking anyway)."""
        return self.send(event, **kwargs)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.block.closed = True
        if exc_type is not None:
            self._abort()
            return
        try:
            unit = self.block.build_commit()
            self._commit(unit)
        except BaseException:
            # A partial commit is a commit: its claims stay leased.
            if self.block.committed is None:
                self._abort()
            raise

    def _commit(self, unit: CommitUnit) -> None:
        block = self.block
        if unit.is_empty:
            if unit.release_lock:
                self.store.release_lock(block.key, unit.lock_token)
            return
        if unit.snapshot is None and not unit.marks and not unit.log_entries:
            for release in unit.releases:
                self.inbox.release(release)  # type: ignore[union-attr]
            if unit.release_lock:
                self.store.release_lock(block.key, unit.lock_token)
            return
        try:
            result = self.store.commit(unit, inbox=self.inbox, log=self.log)
        except PartialCommitError as exc:
            block.on_committed(CommitResult(version=exc.version))
            raise
        block.on_committed(result)

    def _claim(self, request: ClaimRequest) -> ClaimOutcome:
        assert self.inbox is not None
        try:
            return self.inbox.claim(request)  # type: ignore[no-any-return]
        except BaseException:
            # The claim may have landed before the reply was lost.
            with contextlib.suppress(Exception):
                self.inbox.release(InboxRelease(request))
            raise

    def _abort(self) -> None:
        """Best effort: drop our claims and lock; leases expire otherwise.
        Never raises, so the exception that caused the abort is the one the
        caller sees."""
        block = self.block
        for release in block.abort_releases():
            with contextlib.suppress(Exception):
                self.inbox.release(release)  # type: ignore[union-attr]
        if block.lock.pessimistic and block.token:
            with contextlib.suppress(Exception):
                self.store.release_lock(block.key, block.token)


class apersisted(_Common):
    """The asyncio twin of :class:`persisted` for ``AsyncStateStore``.

    Inside the block, ``send()`` works for events without an idempotency
    key; a key not known at open needs ``await order.asend(...)`` (its claim
    is a round trip).
    """

    def __init__(self, store: Any, key: str, machine: Any, **kwargs: Any) -> None:
        super().__init__(store, key, machine, is_async=True, **kwargs)
        # A sync backend here would block the event loop or, worse, fail
        # half way through a commit; refuse it before any I/O.
        _require_async(store, "open", "store", "an AsyncStateStore such as AsyncRedisStore")
        if self.inbox is not None:
            _require_async(self.inbox, "claim", "inbox", "an async inbox such as AsyncRedisInbox")
        if self.log is not None and not store.shares_commit(self.log):
            _require_async(self.log, "append_next", "log", "an async log such as AsyncRedisLog")

    async def __aenter__(self) -> PersistedInstance:
        block = self.block
        try:
            if not self.claims_in_open and block.block_claim is not None:
                assert self.inbox is not None
                block.on_block_claim(await self.inbox.claim(block.block_claim))
            block.on_opened(await self._open())
        except BaseException:
            await self._abort()
            raise
        block.driver = self
        return block

    async def _open(self) -> OpenResult:
        block = self.block
        deadline = time.monotonic() + block.lock.timeout
        while True:
            if self.claims_in_open:
                result: OpenResult = await self.store.open(
                    block.open_request(with_claims=True), inbox=self.inbox
                )
            else:
                result = await self.store.open(block.open_request(with_claims=False))
            if not result.lock_busy_ms or not block.lock.pessimistic:
                return result
            if time.monotonic() >= deadline:
                raise _lock_timeout(block, result.lock_busy_ms)
            import asyncio  # deferred: asyncio costs ~20 ms to import

            await asyncio.sleep(min(block.lock.poll_s * 2, max(deadline - time.monotonic(), 0)))

    def send(
        self,
        event: Any,
        /,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
        reason: str = "",
        correlation_id: str | None = None,
        strict: bool | None = None,
        **payload: Any,
    ) -> Any:
        block = self.block
        etype, data, step = block.prepare_send(event, payload, idempotency_key)
        if isinstance(step, ReplayedReceipt):
            return step
        if step is not None:
            raise XsmError(
                "send(idempotency_key=...) inside apersisted() needs a claim round trip",
                hint="use 'await order.asend(...)', or pass the key to apersisted()",
            )
        return block.run(
            etype,
            data,
            None,
            actor=actor,
            reason=reason,
            correlation_id=correlation_id,
            strict=strict,
        )

    async def asend(
        self,
        event: Any,
        /,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
        reason: str = "",
        correlation_id: str | None = None,
        strict: bool | None = None,
        **payload: Any,
    ) -> Any:
        block = self.block
        etype, data, step = block.prepare_send(event, payload, idempotency_key)
        claim: SendClaim | None = None
        if isinstance(step, ReplayedReceipt):
            return step
        if step is not None:
            got = block.on_send_claim(await self._claim(step))
            if isinstance(got, ReplayedReceipt):
                return got
            claim = got
        return block.run(
            etype,
            data,
            claim,
            actor=actor,
            reason=reason,
            correlation_id=correlation_id,
            strict=strict,
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.block.closed = True
        if exc_type is not None:
            await self._abort()
            return
        try:
            unit = self.block.build_commit()
            await self._commit(unit)
        except BaseException:
            if self.block.committed is None:
                await self._abort()
            raise

    async def _commit(self, unit: CommitUnit) -> None:
        block = self.block
        if unit.is_empty:
            if unit.release_lock:
                await self.store.release_lock(block.key, unit.lock_token)
            return
        if unit.snapshot is None and not unit.marks and not unit.log_entries:
            for release in unit.releases:
                await self.inbox.release(release)  # type: ignore[union-attr]
            if unit.release_lock:
                await self.store.release_lock(block.key, unit.lock_token)
            return
        try:
            result = await self.store.commit(unit, inbox=self.inbox, log=self.log)
        except PartialCommitError as exc:
            block.on_committed(CommitResult(version=exc.version))
            raise
        block.on_committed(result)

    async def _claim(self, request: ClaimRequest) -> ClaimOutcome:
        assert self.inbox is not None
        try:
            return await self.inbox.claim(request)  # type: ignore[no-any-return]
        except BaseException:
            with contextlib.suppress(Exception):
                await self.inbox.release(InboxRelease(request))
            raise

    async def _abort(self) -> None:
        block = self.block
        for release in block.abort_releases():
            with contextlib.suppress(Exception):
                await self.inbox.release(release)  # type: ignore[union-attr]
        if block.lock.pessimistic and block.token:
            with contextlib.suppress(Exception):
                await self.store.release_lock(block.key, block.token)
