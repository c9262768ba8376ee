"""Whether the ``XSM`` settings name a usable connection, answered once.

The backend refuses to build on the first of these problems
(``ImproperlyConfigured``) and ``manage.py check`` reports all of them as
errors under their ids, with the same words:

=============  ===================================================================
``xsm.E002``   ``PREFIX`` missing or not 1-64 of ``A-Z a-z 0-9 _ . - : /``
``xsm.E003``   both ``REDIS_URL`` and ``CACHE_ALIAS`` are set
``xsm.E004``   ``REDIS_URL`` is not a ``redis://``, ``rediss://`` or ``unix://`` URL
``xsm.E005``   ``CACHE_ALIAS`` names no cache in ``CACHES``
``xsm.E006``   ``CACHE_ALIAS`` is not an unsharded django-redis cache
``xsm.E008``   no Redis configured and the embedded default is off
``xsm.E009``   the embedded default needs fakeredis and lupa
=============  ===================================================================

Nothing here touches the network, and no message echoes any part of the
URL (it may carry a password).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from django_xsm.conf import XsmSettings
from django_xsm.persistence.base import validate_prefix

from .clients import cache_alias_problem

__all__ = ["ConnectionProblem", "connection_problems", "require_usable"]

_SCHEMES = ("redis", "rediss", "unix")


@dataclass(frozen=True, slots=True)
class ConnectionProblem:
    """One reason the settings cannot give a working store: the check
    ``id``, the ``message`` and how to fix it (``hint``, may be empty)."""

    id: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


def _prefix(s: XsmSettings) -> list[ConnectionProblem]:
    if s.prefix is None:
        return [
            ConnectionProblem(
                "xsm.E002",
                "XSM['PREFIX'] is not set",
                "set a namespace for this application's keys, e.g. XSM = {'PREFIX': 'shop'}",
            )
        ]
    try:
        validate_prefix(s.prefix)
    except ValueError as exc:
        return [ConnectionProblem("xsm.E002", f"XSM['PREFIX'] is invalid: {exc}")]
    return []


def _url_is_usable(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError:
        return False
    return parts.scheme in _SCHEMES


def _embedded(s: XsmSettings) -> list[ConnectionProblem]:
    if not s.uses_embedded:
        return [
            ConnectionProblem(
                "xsm.E008",
                "XSM has no Redis configured and DEBUG is off",
                "set XSM['REDIS_URL'] (or CACHE_ALIAS); the in-process fakeredis default "
                "keeps state in one process only and runs only with DEBUG=True "
                "(or XSM['EMBEDDED']=True, e.g. in tests)",
            )
        ]
    missing = [m for m in ("fakeredis", "lupa") if importlib.util.find_spec(m) is None]
    if missing:
        return [
            ConnectionProblem(
                "xsm.E009",
                f"The embedded XSM store needs {' and '.join(missing)}",
                "pip install 'django-xsm[embedded]', or set XSM['REDIS_URL']",
            )
        ]
    return []


def connection_problems(s: XsmSettings) -> list[ConnectionProblem]:
    """Every reason ``s`` cannot give a working store, in check-id order."""
    out = _prefix(s)
    if s.redis_url and s.cache_alias:
        out.append(
            ConnectionProblem(
                "xsm.E003",
                "XSM sets both REDIS_URL and CACHE_ALIAS",
                "keep one: REDIS_URL for a dedicated client, CACHE_ALIAS to share a "
                "django-redis pool",
            )
        )
    if s.redis_url and not _url_is_usable(s.redis_url):
        out.append(
            ConnectionProblem(
                "xsm.E004",
                "XSM['REDIS_URL'] is not a usable redis://, rediss:// or unix:// URL",
                "use redis://host:6379/0, rediss://host:6380/0 (TLS) or unix:///path/redis.sock",
            )
        )
    if s.cache_alias:
        problem = cache_alias_problem(s.cache_alias)
        if problem is not None:
            unknown = problem.startswith("there is no cache")
            out.append(
                ConnectionProblem(
                    "xsm.E005" if unknown else "xsm.E006", f"XSM['CACHE_ALIAS']: {problem}"
                )
            )
    if not (s.redis_url or s.cache_alias):
        out.extend(_embedded(s))
    return out


def require_usable(s: XsmSettings) -> None:
    """Raise ``ImproperlyConfigured`` with the first connection problem."""
    problems = connection_problems(s)
    if problems:
        raise ImproperlyConfigured(str(problems[0]))
