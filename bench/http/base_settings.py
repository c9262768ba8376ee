"""Settings shared by the three benchmark sites (``site_xsm``, ``site_fsm``,
``site_peer``): production-like (DEBUG off, no access log, no sessions,
no auth middleware), one middleware common to all of them.

Each site imports ``*`` from here and adds its own apps, store and URLs.
The environment (set by ``run.py``) says where the stores are.
"""

from __future__ import annotations

import os

DEBUG = False
SECRET_KEY = "bench-http-not-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS: list[str] = []
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
# BENCH_LEAN_MIDDLEWARE=1: none of Django's own middleware. Under ASGI every
# MiddlewareMixin hook (CommonMiddleware's process_request/_response) is a
# sync_to_async hop: a thread per request (run.py's xsm-async-lean)
if os.environ.get("BENCH_LEAN_MIDDLEWARE") == "1":
    MIDDLEWARE = []
DATABASES: dict[str, dict[str, object]] = {}
TEMPLATES: list[dict[str, object]] = []
# the benchmark's Redis (own redis-server, own port; see run.py)
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6399/0")
# problems are logged on stderr, nothing else (no INFO lines per request)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
