"""Self-contained settings for the Django-layer tests (pytest-django).

The store is the embedded fakeredis (``EMBEDDED: True``, since pytest-django
runs with ``DEBUG=False``); the ``backend`` fixture switches to a live
server when ``XSM_REDIS_URL`` is set. The demo's order app is installed so
its views and machine are tested too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.django.databases import postgres_settings

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "django-xsm-tests"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.messages",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django_xsm",
    "testproject.orders",
    "tests.fieldapp",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_xsm.middleware.XsmMiddleware",
]

ROOT_URLCONF = "tests.django.urls"
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
# Django's advice for test speed: the default PBKDF2 hasher spends about half a
# second of CPU on every user created and every login on a small machine.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES: dict[str, dict[str, Any]] = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
}
# The model-field tests also run on a real PostgreSQL when one answers
# (XSM_PG_HOST / XSM_PG_PORT, default 127.0.0.1:5432, user postgres);
# they skip cleanly without one, except under CI where it is required.
POSTGRES = postgres_settings()
if POSTGRES is not None:
    DATABASES["postgres"] = POSTGRES
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

XSM = {
    "PREFIX": "xsmtest",
    "EMBEDDED": True,
    "MACHINES": {
        "ticket": "tests.django.machines.ticket",
        "order": "testproject.orders.machines.order",
        "shop": {
            "CONFIG": "tests.fieldapp.machines.SHOP_ORDER",
            "LOGIC": "tests.fieldapp.machines.shop_logic",
            "PERMISSIONS": {"REFUND": "fieldapp.refund_order"},
        },
        "parcel": "tests.fieldapp.machines.parcel",
        "signup": "tests.fieldapp.machines.signup",
        "desk": "tests.fieldapp.machines.desk",
    },
    "LOCK_TIMEOUT_S": 0.2,
    "CONFLICT_RETRIES": 2,
    "IDEMPOTENCY": {"MAX_RESPONSE_BYTES": 4096},
    # quiet streams of the in-process browser tests end soon after their page
    "STREAM": {"HEARTBEAT_S": 1, "MAX_SECONDS": 30},
    # the demo's order emits these (xsm.E013 wants a handler for each)
    "OUTBOX": {
        "HANDLERS": {
            "order.paid": "testproject.orders.effects.send_receipt",
            "order.shipped": "testproject.orders.effects.ship_to_warehouse",
            "desk.*": "tests.fieldapp.machines.desk_effect",
        }
    },
}

ORDERS_PAYMENT_TIMEOUT_MS = 60_000
ORDERS_WEBHOOK_SECRET = "test-webhook-secret"
ORDERS_TIMER_THREAD = False
