"""The demo's order app: connects the signal receivers and, in the demo
server, runs a due-timer scanner thread and (``DEMO_OUTBOX_THREAD=1``, set
by scripts/demo for the embedded store) an outbox worker thread."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from django.apps import AppConfig
from django.conf import settings

logger = logging.getLogger("testproject.orders")


class OrdersConfig(AppConfig):
    name = "testproject.orders"
    label = "orders"
    verbose_name = "Orders (django-xsm demo)"

    def ready(self) -> None:
        from . import receivers  # noqa: F401  (connects post_transition)

        if getattr(settings, "ORDERS_TIMER_THREAD", False) and _serving():
            start_timer_thread(float(getattr(settings, "ORDERS_TIMER_INTERVAL_S", 1.0)))
        if getattr(settings, "ORDERS_OUTBOX_THREAD", False) and _serving():
            start_outbox_thread(float(getattr(settings, "ORDERS_OUTBOX_INTERVAL_S", 0.5)))


def _serving() -> bool:
    """True in the process that serves requests: runserver's autoreloader
    parent only watches files (RUN_MAIN marks the child that serves)."""
    if "runserver" in sys.argv:
        return os.environ.get("RUN_MAIN") == "true" or "--noreload" in sys.argv
    return False


_stop = threading.Event()


def start_timer_thread(interval_s: float) -> threading.Thread:
    """Scan for due ``after`` timers every ``interval_s`` in a daemon thread.

    The embedded store lives inside this process, so a cron job could not
    reach it; with a real Redis, ``manage.py xsm_scan_timers --loop`` in its
    own process is the production set-up (many scanners may run at once).
    """
    from django_xsm.backend import get_scanner

    def run() -> None:
        scanner = get_scanner()
        scanner.run_forever(
            interval_s,
            stop=_stop,
            on_scan=lambda r: r.fired and logger.info("timer scan: %s", r.as_dict()),
        )

    thread = threading.Thread(target=run, name="xsm-timer-scanner", daemon=True)
    thread.start()
    logger.info("due-timer scanner thread started (every %.1f s)", interval_s)
    return thread


_outbox_lock = threading.Lock()
_outbox_thread: threading.Thread | None = None


def start_outbox_thread(interval_s: float) -> threading.Thread:
    """Deliver the outbox in a daemon thread (once per process: a second
    call returns the running thread), polling every ``interval_s`` while idle.

    What ``manage.py xsm_run_outbox`` does in its own process, which is the
    production set-up (and the demo's with ``REDIS_URL``): the embedded
    store lives inside this process, so only a thread of it can read it.
    """
    from django_xsm.outbox import OutboxWorker, run_worker

    global _outbox_thread
    with _outbox_lock:
        if _outbox_thread is not None and _outbox_thread.is_alive():
            return _outbox_thread

        def run() -> None:
            worker = OutboxWorker.from_settings(consumer=f"demo-server-{os.getpid()}")
            run_worker(worker, stop=_stop, interval_s=interval_s, on_batch=_log_batch)

        _outbox_thread = threading.Thread(target=run, name="xsm-outbox-worker", daemon=True)
        _outbox_thread.start()
    logger.info("outbox worker thread started (polling every %.1f s)", interval_s)
    return _outbox_thread


def _log_batch(result: Any, error: str | None) -> None:
    if error:
        logger.warning("outbox worker: the store is unavailable (%s)", error)
    elif result.taken:
        logger.info("outbox batch: %s", result.as_dict())
