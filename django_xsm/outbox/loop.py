"""Running a worker: drain once (cron, tests) or as a daemon (``xsm_run_outbox``).

Neither loop sleeps after a failed delivery (retry times live in Redis);
the daemon polls every ``interval_s`` only when a batch found nothing. An
outage (``StoreError``) is waited out by the daemon; :func:`drain` lets it
propagate, so ``--once`` exits non-zero.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from django_xsm.exceptions import StoreError

from .results import LoopResult, WorkResult
from .worker import OutboxWorker

__all__ = ["drain", "run_worker"]


def _deadline(max_seconds: float | None) -> float:
    return math.inf if max_seconds is None else time.monotonic() + max_seconds


def drain(
    worker: OutboxWorker,
    *,
    stop: threading.Event | None = None,
    max_seconds: float | None = None,
    on_batch: Callable[[WorkResult], None] | None = None,
) -> WorkResult:
    """Take batches until one comes back empty: everything due now (retries
    whose time has come included) is handled once or scheduled again.
    Stops early between batches on ``stop`` or after ``max_seconds``."""
    deadline = _deadline(max_seconds)
    total = WorkResult()
    while not (stop is not None and stop.is_set()) and time.monotonic() < deadline:
        result = worker.run_batch()
        total.merge(result)
        if on_batch is not None:
            on_batch(result)
        if result.taken == 0:
            break
    return total


def run_worker(
    worker: OutboxWorker,
    *,
    stop: threading.Event,
    interval_s: float = 1.0,
    max_seconds: float | None = None,
    on_batch: Callable[[WorkResult, str | None], None] | None = None,
) -> LoopResult:
    """Batch after batch until ``stop`` is set (or ``max_seconds`` passed).

    ``on_batch(result, message)`` sees every batch; ``message`` is the
    store error's text when Redis failed (the batch then counts as
    ``unavailable``) and the loop waits ``interval_s`` before trying again.
    The batch in hand always finishes: ``stop`` is checked between batches
    and during the wait.
    """
    deadline = _deadline(max_seconds)
    total, batches = WorkResult(), 0
    while not stop.is_set() and time.monotonic() < deadline:
        message: str | None = None
        try:
            result = worker.run_batch()
        except StoreError as exc:
            result, message = WorkResult(unavailable=1), exc.message
        batches += 1
        total.merge(result)
        if on_batch is not None:
            on_batch(result, message)
        if message is None and result.taken:
            continue  # more may be waiting: no pause while there is work
        stop.wait(max(0.0, min(interval_s, deadline - time.monotonic())))
    return LoopResult(total, batches)
