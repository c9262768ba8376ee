"""django-xsm: the order lives in Redis, ``@stateful_view`` with audit on
(the default), the idempotency key claimed in the open script and the
response stored with the commit. ``BENCH_LOCK`` picks the lock; unset,
``XSM['LOCK']`` is left to its default (``adaptive``)."""

from __future__ import annotations

import os

from base_settings import *  # noqa: F403
from base_settings import MIDDLEWARE, REDIS_URL

INSTALLED_APPS = ["django_xsm"]
MIDDLEWARE = [*MIDDLEWARE, "django_xsm.middleware.XsmMiddleware"]
ROOT_URLCONF = "site_xsm.urls"
WSGI_APPLICATION = "site_xsm.wsgi.application"

XSM = {
    "REDIS_URL": REDIS_URL,
    "PREFIX": "bench",
    "MACHINES": {"order": "site_xsm.machines.order"},
    "IDEMPOTENCY": {"REQUIRED": ["POST"]},
}
if os.environ.get("BENCH_LOCK"):
    XSM["LOCK"] = os.environ["BENCH_LOCK"]
