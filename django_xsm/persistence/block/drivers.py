"""persisted() / apersisted(): load, let the body send events, commit once.

::

    with persisted(store, "order:42", machine, plugins=plugins) as order:
        order.send("PAY", idempotency_key="evt_1", actor="alice")

Both are short drivers of the same block generators
(:class:`~django_xsm.persistence.block.instance.PersistedInstance`):
``persisted()`` runs their requests on blocking backends, ``apersisted()``
awaits them on asyncio ones. The inbox and the log commit in the store's
own atomic step (the same Redis and prefix); any other is refused when the
block is built (``InvalidConfigError``). Round trips: one to open (lock +
claims known at open + load) and one to commit (fences + snapshot +
deadlines + marks + log + unlock). A ``send()`` whose idempotency key was not known at open adds one
claim round trip. A block that changed nothing writes nothing (a held lock
is released, unfinished claims are dropped). An exception in the body
writes nothing and releases claims and the lock.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from django_xsm.exceptions import InvalidConfigError, XsmError
from django_xsm.persistence.base import require_shared_commit
from django_xsm.persistence.locks import LockStrategy, OptimisticLock
from django_xsm.persistence.runner import Apply, adrive, drive

from .instance import PersistedInstance
from .options import BlockOptions
from .requests import BlockOp, Claim, Commit, Open, Release, ReleaseLock, Request, WaitUnlocked

__all__ = ["apersisted", "persisted"]

logger = logging.getLogger("django_xsm.persistence")

T = TypeVar("T")


class _Backends:
    """The store, inbox and log one block's requests run on."""

    def __init__(self, store: Any, inbox: Any, log: Any) -> None:
        self.store = store
        self.inbox = inbox
        self.log = log

    def call(self, request: Request) -> Apply:
        """The backend method that executes ``request`` (not a WaitUnlocked)."""
        if isinstance(request, Open):
            return Apply(self.store.open, (request.request,), {"inbox": self.inbox})
        if isinstance(request, Claim):
            return Apply(self.inbox.claim, (request.request,))
        if isinstance(request, Commit):
            return Apply(self.store.commit, (request.unit,), {"inbox": self.inbox, "log": self.log})
        if isinstance(request, Release):
            return Apply(self.inbox.release, (request.release,))
        assert isinstance(request, ReleaseLock)
        return Apply(self.store.release_lock, (request.key, request.token))


class _SyncIO(_Backends):
    is_async = False

    def run(self, op: BlockOp[T]) -> T:
        return drive(op, self._execute)

    async def arun(self, op: BlockOp[T]) -> T:
        # A sync block's I/O is blocking anyway.
        return self.run(op)

    def _execute(self, request: Request) -> Any:
        if isinstance(request, WaitUnlocked):
            return self.store.wait_unlocked(request.key, request.seconds)
        return self.call(request)()


class _AsyncIO(_Backends):
    is_async = True

    def run(self, op: BlockOp[T]) -> T:
        """A plain ``send()`` inside ``apersisted()``: fine without I/O."""
        try:
            next(op)
        except StopIteration as stop:
            result: T = stop.value
            return result
        op.close()
        raise XsmError(
            "send(idempotency_key=...) inside apersisted() needs a claim round trip",
            hint="use 'await order.asend(...)', or pass the key to apersisted()",
        )

    async def arun(self, op: BlockOp[T]) -> T:
        return await adrive(op, self._execute)

    async def _execute(self, request: Request) -> Any:
        if isinstance(request, WaitUnlocked):
            return await self.store.wait_unlocked(request.key, request.seconds)
        return await self.call(request)()


class _Driver:
    """What both drivers share: the options, built once, the block, and
    the runner of its requests."""

    _io_class: type[_SyncIO | _AsyncIO]

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
        max_payload_bytes: int | None = None,
    ) -> None:
        options = BlockOptions(
            plugins=tuple(plugins or ()),
            lock=lock or OptimisticLock(),
            create=create,
            strict=strict,
            actor=actor,
            correlation_id=correlation_id,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
            principal=principal,
            context=context,
            clock=clock,
            max_payload_bytes=max_payload_bytes,
        )
        self.block = PersistedInstance(store, key, machine, options)
        self.store = store
        self.inbox = self.block.idempotency.inbox if self.block.idempotency else None
        self.log = self.block.audit.log if self.block.audit is not None else None
        self._check_backends()
        self.io = self._io_class(store, self.inbox, self.log)

    def _check_backends(self) -> None:
        """Before any I/O: the inbox and log commit with the store."""
        require_shared_commit(self.store, inbox=self.inbox, log=self.log)


class persisted(_Driver):
    """Context manager around one instance; see the module docstring.

    ``create=False`` raises ``InstanceNotFoundError`` for a missing key.
    ``idempotency_key`` (with ``fingerprint`` and ``principal``) claims a key
    for the whole block at open; ``strict=True`` makes every send raise
    ``EventNotAcceptedError`` when no transition is taken.
    ``max_payload_bytes`` refuses larger event payloads before any I/O
    (``PayloadTooLargeError``). The options are those of
    :class:`~django_xsm.persistence.block.options.BlockOptions`.
    """

    _io_class = _SyncIO

    def __enter__(self) -> PersistedInstance:
        self.io.run(self.block.open_op(self.io))
        return self.block

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.io.run(self.block.close_op(failed=exc_type is not None))


class apersisted(_Driver):
    """The asyncio twin of :class:`persisted` for ``AsyncStateStore``.

    Inside the block, ``send()`` works for events without an idempotency
    key; a key not known at open needs ``await order.asend(...)`` (its claim
    is a round trip).
    """

    _io_class = _AsyncIO

    def _check_backends(self) -> None:
        # A sync backend here would block the event loop; refuse it before
        # any I/O, and before the rule of one commit (which it breaks too).
        store, inbox = self.store, self.inbox
        _require_async(store, store.open, "store", "an AsyncStateStore such as AsyncRedisStore")
        if inbox is not None:
            _require_async(inbox, inbox.claim, "inbox", "an async inbox such as AsyncRedisInbox")
        super()._check_backends()

    async def __aenter__(self) -> PersistedInstance:
        await self.io.arun(self.block.open_op(self.io))
        return self.block

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.io.arun(self.block.close_op(failed=exc_type is not None))
        committed = self.block.committed
        if committed is None:
            return
        for hook in self.block.hooks:
            # durable already: an error must not look like a failed block
            try:
                await hook.aafter_commit(self.block, committed)
            except Exception:
                logger.exception("aafter_commit hook %r failed for %r", hook, self.block.key)


def _require_async(obj: Any, method: Any, what: str, wanted: str) -> None:
    """``method`` of ``obj`` (the store's ``open``, the inbox's ``claim``:
    declared by the sync and the async protocols) must be the async twin's."""
    if not inspect.iscoroutinefunction(method):
        raise InvalidConfigError(
            f"apersisted() needs {wanted}, got {type(obj).__name__}",
            path=what,
            hint="use persisted() with sync backends, or the async twin of this one",
        )
