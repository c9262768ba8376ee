"""Django settings of ``bench/outbox.py``'s workers: the bench's redis-server
and prefix, one no-op handler for every event type."""

from __future__ import annotations

import os

SECRET_KEY = "bench-only"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_xsm"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
USE_TZ = True
SILENCED_SYSTEM_CHECKS = ["xsm.W003"]  # no machines: the workers only deliver
XSM = {
    "REDIS_URL": os.environ["XSM_BENCH_URL"],
    "PREFIX": os.environ["XSM_BENCH_PREFIX"],
    "MACHINES": {},
    "OUTBOX": {"HANDLERS": {"*": "bench.outbox_settings.deliver"}},
}


def deliver(event: dict[str, object], *, delivery: object) -> None:
    """The no-op handler: what is measured is the outbox, not the work."""
