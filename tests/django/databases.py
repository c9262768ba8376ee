"""The optional PostgreSQL database of the model-field tests.

``postgres_settings()`` returns a ``DATABASES`` entry when a PostgreSQL
server answers at ``XSM_PG_HOST``:``XSM_PG_PORT`` (default
127.0.0.1:5432, user ``XSM_PG_USER`` or ``postgres``, trust or
``XSM_PG_PASSWORD``) and psycopg is installed; else None, and the tests
that need it skip (``.ci/run`` sets ``XSM_REQUIRE_PG=1``, which turns the
skip into a failure).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["postgres_settings", "require_postgres"]


def _params() -> dict[str, Any]:
    return {
        "host": os.environ.get("XSM_PG_HOST", "127.0.0.1"),
        "port": int(os.environ.get("XSM_PG_PORT", "5432")),
        "user": os.environ.get("XSM_PG_USER", "postgres"),
        "password": os.environ.get("XSM_PG_PASSWORD", ""),
    }


def _answers(params: dict[str, Any]) -> bool:
    try:
        import psycopg
    except ImportError:
        return False
    try:
        with psycopg.connect(dbname="postgres", connect_timeout=2, **params):
            return True
    except psycopg.Error:
        return False


def postgres_settings() -> dict[str, Any] | None:
    params = _params()
    if not _answers(params):
        return None
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "xsm",
        "USER": params["user"],
        "PASSWORD": params["password"],
        "HOST": params["host"],
        "PORT": str(params["port"]),
        "TEST": {"NAME": f"test_xsm_{os.getpid()}"},
    }


def require_postgres() -> bool:
    """True when a missing PostgreSQL must fail the run instead of skipping."""
    return os.environ.get("XSM_REQUIRE_PG", "") == "1"
