"""What a :class:`~django_xsm.persistence.DueTimerScanner` tells its
observers (tracing): :class:`ScanObserver`, the base of their hooks, and
the observers every scanner of the process gets
(:func:`add_process_observer`).

A scanner decides once per ``scan()`` (and per direct ``fire()``) which
observers it has: its own (``observers=``) and the process's of a class it
has none of. With none, it enters the shared null context
:data:`NO_OBSERVATION` and calls nothing else. An observer's error is
logged, never raised, and never replaces nor suppresses the scanner's own
exception: what a scan or a fire returns is the same with or without it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .timers import DueTimerScanner, ScanResult

__all__ = [
    "NO_OBSERVATION",
    "ScanObserver",
    "add_process_observer",
    "observed",
    "observers_of",
    "process_observers",
    "remove_process_observer",
]

logger = logging.getLogger("django_xsm.timers")

#: What a scanner enters around a scan or a fire nobody observes.
NO_OBSERVATION: AbstractContextManager[None] = contextlib.nullcontext()


class ScanObserver:
    """Base for observers of a due-timer scanner: synchronous, no I/O
    expected. Each hook returns a context manager the scanner enters
    before the work and exits with the exception that ended it; ``result``
    is the :class:`~django_xsm.persistence.ScanResult` the work fills,
    final when the context exits without an exception."""

    def scan(self, scanner: DueTimerScanner, result: ScanResult) -> AbstractContextManager[None]:
        """Around one ``scan()``: the due keys' query and a ``fire`` per
        due key."""
        return NO_OBSERVATION

    def fire(
        self, scanner: DueTimerScanner, key: str, result: ScanResult
    ) -> AbstractContextManager[None]:
        """Around the fire of ``key`` (inside the scan's context when the
        scan fires it): its block and the bookkeeping of a failure."""
        return NO_OBSERVATION


_process_lock = threading.Lock()
_process: tuple[ScanObserver, ...] = ()


def add_process_observer(observer: ScanObserver) -> None:
    """Give every scanner, already built or not, ``observer`` (a scanner
    given an observer of the same class keeps its own). Tracing
    (``django_xsm.contrib.otel``) uses it; idempotent."""
    global _process
    if not isinstance(observer, ScanObserver):
        raise TypeError(f"{type(observer).__name__} is not a ScanObserver")
    with _process_lock:
        if observer not in _process:
            _process = (*_process, observer)


def remove_process_observer(observer: ScanObserver) -> None:
    """Stop giving scanners ``observer``."""
    global _process
    with _process_lock:
        _process = tuple(o for o in _process if o is not observer)


def process_observers() -> tuple[ScanObserver, ...]:
    """The observers every scanner gets."""
    return _process


def observers_of(own: tuple[ScanObserver, ...]) -> tuple[ScanObserver, ...]:
    """``own`` and the process's observers of a class ``own`` has none of."""
    if not _process:
        return own
    shared = tuple(p for p in _process if not any(isinstance(o, type(p)) for o in own))
    return (*own, *shared)


class _Observed:
    """The work ``what`` (``"scan"``, or the key fired) around the context
    of each observer: one that fails to enter or to exit is logged and
    skipped; the work's exception is never replaced nor suppressed."""

    __slots__ = ("entered", "hook", "observers", "what")

    def __init__(
        self,
        observers: tuple[ScanObserver, ...],
        hook: Callable[[ScanObserver], AbstractContextManager[None]],
        what: str,
    ) -> None:
        self.observers = observers
        self.hook = hook
        self.what = what
        self.entered: list[tuple[ScanObserver, AbstractContextManager[None]]] = []

    def __enter__(self) -> None:
        for observer in self.observers:
            try:
                manager = self.hook(observer)
                manager.__enter__()
            except Exception:
                logger.exception("scan observer %r failed (%s)", observer, self.what)
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
                logger.exception("scan observer %r failed (%s)", observer, self.what)


def observed(
    observers: tuple[ScanObserver, ...],
    hook: Callable[[ScanObserver], AbstractContextManager[None]],
    what: str,
) -> AbstractContextManager[None]:
    """What a scanner enters around ``what`` (``hook``: the observer's
    method to call): a shared null context when there is no observer."""
    if not observers:
        return NO_OBSERVATION
    return _Observed(observers, hook, what)
