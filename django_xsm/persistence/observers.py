"""Observers: code that watches the block, the due-timer scanner and the
outbox reader (tracing, metrics) without changing what they do: an
observer's error is logged, never raised, and never replaces nor
suppresses the watched work's own exception. Nobody observing costs a
shared null context. A :class:`Registry` holds the observers every
watched object of the process gets besides its own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["NO_OBSERVATION", "Registry", "notify", "observed"]

ObserverT = TypeVar("ObserverT")

#: What the watched code enters around work nobody observes.
NO_OBSERVATION: AbstractContextManager[None] = contextlib.nullcontext()


class Registry(Generic[ObserverT]):
    """The observers of class ``kind`` every watched object of the process
    gets, besides its own: :meth:`joined` adds those of a class it has
    none of."""

    __slots__ = ("_lock", "items", "kind")

    def __init__(self, kind: type[ObserverT]) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self.items: tuple[ObserverT, ...] = ()

    def add(self, observer: ObserverT) -> None:
        """Give every watched object of the process ``observer``
        (idempotent); anything but a ``kind`` is a ``TypeError``."""
        if not isinstance(observer, self.kind):
            raise TypeError(f"{type(observer).__name__} is not a {self.kind.__name__}")
        with self._lock:
            if observer not in self.items:
                self.items = (*self.items, observer)

    def remove(self, observer: ObserverT) -> None:
        """Stop giving watched objects ``observer``."""
        with self._lock:
            self.items = tuple(o for o in self.items if o is not observer)

    def registered(self) -> tuple[ObserverT, ...]:
        """The observers every watched object gets."""
        return self.items

    def joined(self, own: Sequence[ObserverT]) -> tuple[ObserverT, ...]:
        """``own`` and the registered observers of a class ``own`` has none of."""
        if not self.items:
            return tuple(own)
        shared = tuple(p for p in self.items if not any(isinstance(o, type(p)) for o in own))
        return (*own, *shared)


class _Observed(Generic[ObserverT]):
    """Work ``what`` inside the context each observer's ``hook`` returns:
    one that fails to enter or to exit is logged and skipped."""

    __slots__ = ("entered", "hook", "label", "logger", "observers", "what")

    def __init__(
        self,
        observers: Sequence[ObserverT],
        hook: Callable[[ObserverT], AbstractContextManager[None]],
        logger: logging.Logger,
        label: str,
        what: str,
    ) -> None:
        self.observers = observers
        self.hook = hook
        self.logger = logger
        self.label = label
        self.what = what
        self.entered: list[tuple[ObserverT, AbstractContextManager[None]]] = []

    def __enter__(self) -> None:
        for observer in self.observers:
            try:
                manager = self.hook(observer)
                manager.__enter__()
            except Exception:
                self.logger.exception("%s %r failed (%s)", self.label, observer, self.what)
                continue
            self.entered.append((observer, manager))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for observer, manager in reversed(self.entered):
            try:
                manager.__exit__(exc_type, exc, tb)
            except Exception:
                self.logger.exception("%s %r failed (%s)", self.label, observer, self.what)


def observed(
    observers: Sequence[ObserverT],
    hook: Callable[[ObserverT], AbstractContextManager[None]],
    logger: logging.Logger,
    label: str,
    what: str,
) -> AbstractContextManager[None]:
    """What the watched code enters around ``what``: each observer's
    ``hook(observer)`` context (errors logged as ``"<label> <observer>
    failed (<what>)"``), or :data:`NO_OBSERVATION` when there is none."""
    if not observers:
        return NO_OBSERVATION
    return _Observed(observers, hook, logger, label, what)


def notify(
    observers: Sequence[ObserverT],
    call: Callable[[ObserverT], object],
    logger: logging.Logger,
    label: str,
    what: str,
) -> None:
    """``call(observer)`` for each observer, errors logged as for :func:`observed`."""
    for observer in observers:
        try:
            call(observer)
        except Exception:
            logger.exception("%s %r failed (%s)", label, observer, what)
