"""Settings of a sample project that tests the demo's order chart with
django-xsm's pytest plugin (docs/testing.md).

Its orders wait one hour for their payment (the chart's ``after``), emit
``order.paid`` (the outbox handler sends a receipt) and notify the customer
through a ``post_transition`` receiver. State lives on the Redis server of
``SHOP_REDIS_URL`` when it is set, else in the embedded fakeredis: the
``xsm`` fixture gives each test a namespace of its own on either.
"""

from __future__ import annotations

import os

SECRET_KEY = "sample-shop-tests"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_xsm",
    "testproject.orders",
]
MIDDLEWARE = ["django_xsm.middleware.XsmMiddleware"]
ROOT_URLCONF = "shop_urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}

XSM = {
    "REDIS_URL": os.environ.get("SHOP_REDIS_URL") or None,
    "PREFIX": "sample-shop",
    "MACHINES": {"order": "testproject.orders.machines.order"},
    "IDEMPOTENCY": {"REQUIRED": ["POST"]},
    "OUTBOX": {
        "HANDLERS": {
            "order.paid": "testproject.orders.effects.send_receipt",
            "order.shipped": "testproject.orders.effects.ship_to_warehouse",
        },
        "MAX_ATTEMPTS": 3,
        "BACKOFF_S": 60.0,
    },
}

# the order chart's payment timeout (its `after`): one hour
ORDERS_PAYMENT_TIMEOUT_MS = 60 * 60 * 1000
ORDERS_WEBHOOK_SECRET = "sample-webhook-secret"
