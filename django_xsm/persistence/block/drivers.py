"""persisted() / apersisted(): load, let the body send events, commit once.

::

    with persisted(store, "order:42", machine, plugins=plugins) as order:
        order.send("PAY", idempotency_key="evt_1", actor="alice")

Both hand the block's generators (:class:`.instance.PersistedInstance`) to
the store's driver, which runs each in one loop: blocking, or awaited on
an asyncio store. An inbox or log that does not commit in the store's own
atomic step is refused when the block is built (``InvalidConfigError``).

Round trips: one to open (lock + claims known at open + load) and one to
commit (fences + snapshot + deadlines + marks + log + unlock); a ``send()``
whose idempotency key was not known at open adds one claim round trip. A
block that changed nothing writes nothing; an exception in the body
writes nothing. Either way claims and the lock are released.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.base import require_shared_commit
from django_xsm.persistence.locks import LockStrategy, OptimisticLock

from .instance import PersistedInstance
from .options import BlockOptions

__all__ = ["apersisted", "persisted"]

logger = logging.getLogger("django_xsm.persistence")


class _Context:
    """What both context managers share: the options, built once, and the block."""

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
        self.inbox = self.block.inbox
        self.log = self.block.log
        self._check_backends()

    def _check_backends(self) -> None:
        """Before any I/O: the inbox and log commit with the store."""
        require_shared_commit(self.store, inbox=self.inbox, log=self.log)


class persisted(_Context):
    """Context manager around one instance; see the module docstring. The
    options are those of :class:`~django_xsm.persistence.block.options.BlockOptions`.
    """

    def _check_backends(self) -> None:
        # An asyncio store here could never run (its driver awaits): refuse
        # it before any I/O, as apersisted() refuses a blocking one.
        _require_kind(self.store, self.store.driver.run, "store", is_async=False)
        super()._check_backends()

    def __enter__(self) -> PersistedInstance:
        driver = self.store.driver
        driver.run(self.block.open_op(driver), self.block.key)
        return self.block

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.store.driver.run(self.block.close_op(failed=exc_type is not None), self.block.key)


class apersisted(_Context):
    """The asyncio twin of :class:`persisted` for ``AsyncStateStore``.

    Inside the block, ``send()`` works for events without an idempotency
    key; a key not known at open needs ``await order.asend(...)`` (its claim
    is a round trip).
    """

    def _check_backends(self) -> None:
        # A sync backend here would block the event loop; refuse it before
        # any I/O, and before the rule of one commit (which it breaks too).
        store, inbox = self.store, self.inbox
        _require_kind(store, store.driver.run, "store", is_async=True)
        if inbox is not None:
            _require_kind(inbox, inbox.claim, "inbox", is_async=True)
        super()._check_backends()

    async def __aenter__(self) -> PersistedInstance:
        driver = self.store.driver
        await driver.run(self.block.open_op(driver, is_async=True), self.block.key)
        return self.block

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        op = self.block.close_op(failed=exc_type is not None)
        await self.store.driver.run(op, self.block.key)
        committed = self.block.committed
        if committed is None:
            return
        for hook in self.block.hooks:
            # durable already: an error must not look like a failed block
            try:
                await hook.aafter_commit(self.block, committed)
            except Exception:
                logger.exception("aafter_commit hook %r failed for %r", hook, self.block.key)


#: (what, asyncio?) -> what a block of that kind needs
_WANTED = {
    ("store", True): "an AsyncStateStore such as AsyncRedisStore",
    ("store", False): "a StateStore such as RedisStore",
    ("inbox", True): "an async inbox such as AsyncRedisInbox",
}


def _require_kind(obj: Any, method: Any, what: str, *, is_async: bool) -> None:
    """``method`` of ``obj`` (what the block runs on: the store's
    ``driver.run``; the inbox's ``claim``) must be the asyncio twin's
    inside ``apersisted()`` and the blocking one's in ``persisted()``."""
    if inspect.iscoroutinefunction(method) == is_async:
        return
    block, other = ("apersisted", "persisted") if is_async else ("persisted", "apersisted")
    raise InvalidConfigError(
        f"{block}() needs {_WANTED[what, is_async]}, got {type(obj).__name__}",
        path=what,
        hint=f"use {other}() with this {what}, or its {'asyncio' if is_async else 'blocking'} twin",
    )
