"""Settings of the django-xsm demo (an order-fulfilment shop).

``python manage.py runserver`` works as is: with no ``REDIS_URL`` in the
environment and DEBUG on, django-xsm keeps its state in an in-process
fakeredis. Set ``REDIS_URL=redis://127.0.0.1:6379/0`` to use a real server.
"""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent

DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
# A demo key: never deploy with it (set DJANGO_SECRET_KEY).
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-xsm-demo-insecure-key")
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_xsm",
    "testproject.orders",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # After AuthenticationMiddleware: the transition log's actor is request.user.
    "django_xsm.middleware.XsmMiddleware",
]

ROOT_URLCONF = "testproject.urls"
WSGI_APPLICATION = "testproject.wsgi.application"
ASGI_APPLICATION = "testproject.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DEMO_DB", str(BASE_DIR / "db.sqlite3")),
    }
}

USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

XSM = {
    "REDIS_URL": os.environ.get("REDIS_URL") or None,
    "PREFIX": "demo-shop",
    "MACHINES": {
        "order": {
            "CONFIG": "testproject.orders.machines.order",
            # the admin's Ship button needs this permission (orders.Order.Meta)
            "PERMISSIONS": {"SHIP": "orders.ship_order"},
        }
    },
    "LOCK": "optimistic",
    "IDEMPOTENCY": {"REQUIRED": ["POST"]},
    "AUDIT": {"MAXLEN": 10_000},
    # Emitted events (order.paid, order.shipped) and where the outbox worker
    # delivers them (orders/effects.py). Small numbers on purpose, so the
    # demo shows retries and a dead letter within seconds: 3 attempts with
    # full-jitter waits of at most 1 s, then 2 s (production keeps the
    # defaults: 10 attempts, 1 s doubling up to 300 s). The flaky warehouse
    # fails every call, so its order.shipped is dead-lettered after about
    # 3 s and the order receives xsm.outbox.failed (-> shipping_failed).
    "OUTBOX": {
        "HANDLERS": {
            "order.paid": "testproject.orders.effects.send_receipt",
            "order.shipped": "testproject.orders.effects.ship_to_warehouse",
        },
        "MAX_ATTEMPTS": 3,
        "BACKOFF_S": 1.0,
        "MAX_BACKOFF_S": 4.0,
        "VISIBILITY_TIMEOUT_S": 30,
    },
    # The order pages follow their order live (/_xsm/stream/<key>, docs/live.md);
    # they are public in the demo, and so are their streams.
    "STREAM": {"PERMISSION": "testproject.orders.views.may_follow"},
}

# The demo app's own settings.
ORDERS_PAYMENT_TIMEOUT_MS = int(os.environ.get("ORDERS_PAYMENT_TIMEOUT_MS", "120000"))
ORDERS_WEBHOOK_SECRET = os.environ.get("ORDERS_WEBHOOK_SECRET", "demo-webhook-secret")
# Fire due `after` timers from a thread of the demo server (the embedded
# store lives in this process; see orders/apps.py).
ORDERS_TIMER_THREAD = True
ORDERS_TIMER_INTERVAL_S = 1.0
# Deliver the outbox from a thread of the demo server: the embedded store is
# visible to this process only, so a separate `manage.py xsm_run_outbox`
# could not see it. On by default for the embedded store (plain runserver
# works too); scripts/demo sets DEMO_OUTBOX_THREAD=1 for it, and =0 with
# REDIS_URL, where it runs xsm_run_outbox beside the server instead.
ORDERS_OUTBOX_THREAD = (
    os.environ.get("DEMO_OUTBOX_THREAD", "0" if os.environ.get("REDIS_URL") else "1") == "1"
)
ORDERS_OUTBOX_INTERVAL_S = 0.5

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "django_xsm.backend.transitions.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    "loggers": {
        "django_xsm": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "testproject": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
