"""django-fsm-2 + django-fsm-log on PostgreSQL (127.0.0.1:5432).

Persistent connections (``CONN_MAX_AGE``), as a deployment would have.
``BENCH_PG_SYNC_COMMIT=off`` sets ``synchronous_commit=off`` on the
connection (the WAL is flushed by the WAL writer within
``3 * wal_writer_delay``: Redis' ``appendfsync everysec`` territory)."""

from __future__ import annotations

import os

from base_settings import *  # noqa: F403

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_fsm_log",
    "site_fsm",
]
ROOT_URLCONF = "site_fsm.urls"
WSGI_APPLICATION = "site_fsm.wsgi.application"
_options = {}
if os.environ.get("BENCH_PG_SYNC_COMMIT"):
    _options["options"] = f"-c synchronous_commit={os.environ['BENCH_PG_SYNC_COMMIT']}"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_PG_DB", "xsm_bench_http"),
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": "5432",
        "CONN_MAX_AGE": 600,
        "OPTIONS": _options,
    }
}
DJANGO_FSM_LOG_STORAGE_METHOD = "django_fsm_log.backends.SimpleBackend"
