"""Block hooks that tracing needs and the block core does not call (yet).

:class:`~django_xsm.persistence.block.Plugin` calls ``on_load``,
``before_send``, ``after_send``, ``after_commit``, ``aafter_commit`` and
``on_lock_busy`` (an open of a pessimistic block found the lock held, once
per poll). A span also needs to know when the open and the commit start,
when they end and with which error, and which sends were answered from the
idempotency inbox. This module calls two more hooks on every plugin of a
block that defines them:

``phase(block, name, event_type) -> AbstractContextManager[None]``
    entered before phase ``name`` starts and exited when it ends, with the
    exception that ended it: ``"open"`` (claims, lock, load, ``on_load``),
    ``"send"`` (one per ``send()`` / ``asend()`` and their ``_reserved``
    twins: claim, ``before_send``,
    the engine, ``after_send``; ``event_type`` is set) and ``"commit"``
    (the exit of a block whose body did not raise: the commit, or the
    release of a block that changed nothing, and ``after_commit``).
``on_replay(block, event_type, receipt)``
    a send returned a :class:`~django_xsm.persistence.idempotency.ReplayedReceipt`.

It also adds process-wide plugins (:func:`adopt`) to every block, the way a
setting read by ``django_xsm.backend.build`` would. Errors of these hooks are
logged (logger ``django_xsm.contrib.otel``), never raised: an observer must
not change what a block does.

:func:`install` wraps ``PersistedInstance.open_op``, ``close_op``, ``send``,
``asend``, ``send_reserved`` and ``asend_reserved`` once, process-wide. A
block none of whose plugins defines the hooks runs the original generators
untouched. Once ``Plugin`` itself has a ``phase`` method (the core calls
the hooks), only the adoption is wrapped.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

from django_xsm.engine import to_event
from django_xsm.persistence.base import StoreOp
from django_xsm.persistence.block import PersistedInstance, Plugin
from django_xsm.persistence.idempotency import ReplayedReceipt

__all__ = ["HOOKS", "adopt", "adopted", "install", "installed", "release", "uninstall"]

logger = logging.getLogger("django_xsm.contrib.otel")

T = TypeVar("T")

#: The hooks this module calls.
HOOKS = ("phase", "on_replay")
#: The core calls them itself: only adoption is left to do here.
NATIVE = hasattr(Plugin, "phase")

_lock = threading.Lock()
_originals: dict[str, Any] = {}
_adopted: list[Plugin] = []


# --- process-wide plugins -------------------------------------------------------------


def adopt(plugin: Plugin) -> None:
    """Give every block opened from now on ``plugin`` (a block that already
    has a plugin of its class keeps its own)."""
    if not isinstance(plugin, Plugin):
        raise TypeError(f"{type(plugin).__name__} is not a Plugin")
    install()
    with _lock:
        if plugin not in _adopted:
            _adopted.append(plugin)


def release(plugin: Plugin) -> None:
    """Stop adding ``plugin`` to new blocks."""
    with _lock:
        if plugin in _adopted:
            _adopted.remove(plugin)


def adopted() -> tuple[Plugin, ...]:
    """The plugins every new block gets."""
    return tuple(_adopted)


def _join(block: PersistedInstance) -> None:
    for plugin in tuple(_adopted):
        if not any(isinstance(hook, type(plugin)) for hook in block.hooks):
            block.hooks.append(plugin)


# --- calling the hooks ---------------------------------------------------------------


def _bridged(block: PersistedInstance) -> list[Any]:
    """The block's plugins that define one of :data:`HOOKS`."""
    if NATIVE:
        return []
    return [h for h in block.hooks if any(callable(getattr(h, n, None)) for n in HOOKS)]


def _notify(hooks: list[Any], name: str, *args: Any) -> None:
    for hook in hooks:
        method = getattr(hook, name, None)
        if method is None:
            continue
        try:
            method(*args)
        except Exception:
            logger.exception("%s hook of %r failed", name, hook)


class _Quiet:
    """A hook's context manager whose errors are logged: it never replaces
    nor suppresses the exception of the phase it wraps."""

    def __init__(self, hook: Any, block: PersistedInstance, name: str, event_type: str) -> None:
        self.hook = hook
        self.cm: Any = None
        try:
            self.cm = hook.phase(block, name, event_type)
            self.cm.__enter__()
        except Exception:
            self.cm = None
            logger.exception("phase hook of %r failed", hook)

    def close(self, exc: BaseException | None) -> None:
        if self.cm is None:
            return
        try:
            self.cm.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
        except Exception:
            logger.exception("phase hook of %r failed", self.hook)


@contextlib.contextmanager
def _phases(block: PersistedInstance, hooks: list[Any], name: str, etype: str) -> Iterator[None]:
    entered = [_Quiet(h, block, name, etype) for h in hooks if callable(getattr(h, "phase", None))]
    try:
        yield
    except BaseException as exc:
        for quiet in reversed(entered):
            quiet.close(exc)
        raise
    for quiet in reversed(entered):
        quiet.close(None)


def _phased(block: PersistedInstance, hooks: list[Any], name: str, op: StoreOp[T]) -> StoreOp[T]:
    """``op`` inside phase ``name`` (``"open"``, ``"commit"``)."""
    with _phases(block, hooks, name, ""):
        return (yield from op)


def _event_type(event: object) -> str:
    try:
        return to_event(event, None).type
    except Exception:
        return ""  # the send itself raises the error


# --- the wrappers --------------------------------------------------------------------


def _open_op(self: PersistedInstance, driver: Any, *, is_async: bool = False) -> StoreOp[None]:
    _join(self)
    op: StoreOp[None] = _originals["open_op"](self, driver, is_async=is_async)
    hooks = _bridged(self)
    return _phased(self, hooks, "open", op) if hooks else op


def _close_op(self: PersistedInstance, *, failed: bool) -> StoreOp[None]:
    op: StoreOp[None] = _originals["close_op"](self, failed=failed)
    hooks = _bridged(self)
    if not hooks or failed:
        return op
    return _phased(self, hooks, "commit", op)


def _sender(name: str) -> Any:
    """The wrapper of the block's method ``name`` (``send``, ``send_reserved``)."""

    def send(self: PersistedInstance, event: object, /, **kwargs: Any) -> Any:
        hooks = _bridged(self)
        if not hooks:
            return _originals[name](self, event, **kwargs)
        etype = _event_type(event)
        with _phases(self, hooks, "send", etype):
            receipt = _originals[name](self, event, **kwargs)
            if isinstance(receipt, ReplayedReceipt):
                _notify(hooks, "on_replay", self, etype, receipt)
        return receipt

    return send


def _asender(name: str) -> Any:
    """The wrapper of the block's coroutine method ``name`` (``asend``...)."""

    async def asend(self: PersistedInstance, event: object, /, **kwargs: Any) -> Any:
        hooks = _bridged(self)
        if not hooks:
            return await _originals[name](self, event, **kwargs)
        etype = _event_type(event)
        with _phases(self, hooks, "send", etype):
            receipt = await _originals[name](self, event, **kwargs)
            if isinstance(receipt, ReplayedReceipt):
                _notify(hooks, "on_replay", self, etype, receipt)
        return receipt

    return asend


_WRAPPERS: dict[str, Any] = {
    "open_op": _open_op,
    "close_op": _close_op,
    "send": _sender("send"),
    "asend": _asender("asend"),
    "send_reserved": _sender("send_reserved"),
    "asend_reserved": _asender("asend_reserved"),
}


def install() -> None:
    """Wrap the block's methods (once per process; idempotent)."""
    with _lock:
        if _originals:
            return
        names = ("open_op",) if NATIVE else tuple(_WRAPPERS)
        for name in names:
            original = PersistedInstance.__dict__[name]
            _originals[name] = original
            setattr(PersistedInstance, name, functools.wraps(original)(_WRAPPERS[name]))


def installed() -> bool:
    return bool(_originals)


def uninstall() -> None:
    """Put the original methods back and forget the adopted plugins."""
    with _lock:
        for name, original in _originals.items():
            setattr(PersistedInstance, name, original)
        _originals.clear()
        _adopted.clear()
