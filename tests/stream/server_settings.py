"""Settings of the server processes the two-server stream tests and the
live-page browser tests start (uvicorn, gunicorn): the Django-layer test
settings, with the Redis, prefix, database and stream settings taken from
the environment the test sets."""

from __future__ import annotations

import os

from tests.django.settings import *  # noqa: F403
from tests.django.settings import XSM as _XSM

ROOT_URLCONF = os.environ.get("XSM_TEST_URLCONF", "tests.stream.urls")
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["XSM_TEST_DB"]}}
STATIC_URL = "/static/"
XSM = {
    **_XSM,
    "REDIS_URL": os.environ["XSM_TEST_REDIS_URL"],
    "EMBEDDED": None,
    "PREFIX": os.environ["XSM_TEST_PREFIX"],
    "SOCKET_TIMEOUT_S": float(os.environ.get("XSM_TEST_SOCKET_TIMEOUT_S", "2")),
    "STREAM": {
        "PERMISSION": os.environ.get("XSM_TEST_PERMISSION", "tests.stream.permissions.token"),
        "HEARTBEAT_S": float(os.environ.get("XSM_TEST_HEARTBEAT_S", "1")),
        "MAX_SECONDS": 60,
        "MAX_CONNECTIONS": int(os.environ.get("XSM_TEST_MAX_STREAMS", "1000")),
    },
}
# What the servers log goes to stderr, which the tests read: a warning is
# expected when Redis goes away; an ERROR or a traceback never is.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
