"""The demo's order app: connects the signal receivers and, in the demo
server, runs a due-timer scanner thread."""

from __future__ import annotations

import logging
import os
import sys
import threading

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
