"""Daemon commands stop cleanly on SIGTERM or SIGINT: :func:`stop_on_signals`."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Stopping", "stop_on_signals"]


@dataclass
class Stopping:
    """``event`` is set by the first SIGTERM or SIGINT; ``received`` names
    the signals that arrived (``["SIGTERM"]``)."""

    event: threading.Event = field(default_factory=threading.Event)
    received: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        """`` on SIGTERM`` (for "Stopped on SIGTERM after ..."), or ``""``."""
        return f" on {self.received[0]}" if self.received else ""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Stopping]:
    """Within the block the first SIGTERM or SIGINT sets ``event`` (the
    loop finishes what it holds, then returns); a second one gets the
    previous behaviour (Ctrl-C twice: quit now). Off the main thread, where
    Python cannot install handlers, only ``event`` stops the loop. The
    previous handlers are back when the block ends."""
    stopping = Stopping()
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        stopping.received.append(signal.Signals(signum).name)
        # Set from another thread: the handler runs on the main thread,
        # which may hold the Event's (non-reentrant) lock right now.
        threading.Thread(target=stopping.event.set, daemon=True).start()
        signal.signal(signum, previous.get(signum, signal.SIG_DFL))

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield stopping
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
