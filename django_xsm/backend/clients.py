"""Redis clients for the Django layer: from a URL, from a django-redis
cache alias, or the embedded in-process fakeredis.

:mod:`django_xsm.backend.build` decides which one a process uses and caches
it, after :func:`django_xsm.backend.readiness.require_usable` has accepted
the settings; this module only builds clients. Nothing here ever puts a host, port or
password into an error message (URLs may carry credentials).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm import conf

__all__ = [
    "async_twin",
    "cache_alias_problem",
    "cache_client",
    "embedded_client",
    "reset_embedded",
    "tie_to_loop",
    "url_client",
]

logger = logging.getLogger("django_xsm")

# Connection options that mean the same for redis.Redis and redis.asyncio;
# everything else in a sync pool's kwargs (parsers, retry objects, event
# handlers) has a sync-only type and must not be copied to an async pool.
_PORTABLE_OPTIONS = (
    "host",
    "port",
    "db",
    "path",
    "username",
    "password",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "socket_keepalive_options",
    "retry_on_timeout",
    "encoding",
    "encoding_errors",
    "client_name",
    "health_check_interval",
    "protocol",
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_data",
    "ssl_check_hostname",
    "ssl_min_version",
    "ssl_ciphers",
    # fakeredis' connection classes
    "server",
    "version",
    "server_type",
    "lua_modules",
)

_embedded_lock = threading.Lock()
_embedded_server: Any = None
_embedded_logged = False


def reset_embedded() -> None:
    """Drop the embedded server: the next client starts from an empty one
    (what a test that changes settings expects)."""
    global _embedded_server
    with _embedded_lock:
        _embedded_server = None


def embedded_client(*, is_async: bool) -> Any:
    """A (sync or asyncio) fakeredis client on this process's embedded server."""
    global _embedded_server, _embedded_logged
    # Installed: readiness.require_usable checked both (fakeredis runs the
    # Lua scripts through lupa).
    import fakeredis

    if _embedded_server is None:
        _embedded_server = fakeredis.FakeServer()
        if not _embedded_logged:
            _embedded_logged = True
            logger.warning(
                "django-xsm is using an in-process fakeredis store (no XSM REDIS_URL or "
                "CACHE_ALIAS): state lives in this process only and is lost on restart; "
                "set XSM['REDIS_URL'] to share it between workers"
            )
    if is_async:
        return fakeredis.FakeAsyncRedis(server=_embedded_server)
    return fakeredis.FakeRedis(server=_embedded_server)


def cache_alias_problem(alias: str) -> str | None:
    """Why ``alias`` cannot serve as the XSM connection, or None when it can
    (used by the system checks; touches no network)."""
    from django.conf import settings

    caches = getattr(settings, "CACHES", {}) or {}
    if alias not in caches:
        known = ", ".join(sorted(caches)) or "none"
        return f"there is no cache {alias!r} in CACHES (defined: {known})"
    backend = str(caches[alias].get("BACKEND", ""))
    if not backend.startswith("django_redis."):
        return (
            f"cache {alias!r} uses {backend or 'no BACKEND'}, not django-redis; "
            "XSM needs a Redis server (use django_redis.cache.RedisCache or REDIS_URL)"
        )
    client_class = str((caches[alias].get("OPTIONS") or {}).get("CLIENT_CLASS", ""))
    if "Shard" in client_class:
        return (
            f"cache {alias!r} is sharded ({client_class}); XSM commits one instance "
            "in one script on one server, so it needs an unsharded alias or REDIS_URL"
        )
    try:
        import django_redis  # noqa: F401
    except ImportError:
        return "django-redis is not installed (pip install django-xsm[django-redis])"
    return None


def cache_client(alias: str) -> Any:
    """The write client of the django-redis cache ``alias`` (one that
    :func:`cache_alias_problem` accepted)."""
    from django_redis import get_redis_connection

    try:
        return get_redis_connection(alias, write=True)
    except NotImplementedError as exc:
        raise ImproperlyConfigured(
            f"XSM['CACHE_ALIAS']: cache {alias!r} cannot hand out a Redis client "
            "(sharded or not django-redis); use REDIS_URL"
        ) from exc


def async_twin(client: Any) -> Any:
    """An asyncio client on the same server as the sync ``client``."""
    import redis.asyncio
    import redis.connection

    pool = client.connection_pool
    cls = pool.connection_class
    module = getattr(cls, "__module__", "")
    if module.startswith("fakeredis"):
        import fakeredis

        async_cls: Any = fakeredis.FakeAsyncRedisConnection
    elif issubclass(cls, redis.connection.SSLConnection):
        async_cls = redis.asyncio.SSLConnection
    elif issubclass(cls, redis.connection.UnixDomainSocketConnection):
        async_cls = redis.asyncio.UnixDomainSocketConnection
    elif issubclass(cls, redis.connection.Connection):
        async_cls = redis.asyncio.Connection
    else:
        raise ImproperlyConfigured(
            f"XSM cannot derive an asyncio client from the cache's {cls.__name__} "
            "connections; set XSM['REDIS_URL'] for async views"
        )
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k in _PORTABLE_OPTIONS}
    async_pool = redis.asyncio.ConnectionPool(connection_class=async_cls, **kwargs)
    # from_pool: the client owns the pool, so aclose() closes its connections.
    return redis.asyncio.Redis.from_pool(async_pool)


def url_client(s: conf.XsmSettings, *, is_async: bool) -> Any:
    import redis
    import redis.asyncio

    assert s.redis_url is not None
    options: dict[str, Any] = {
        "socket_timeout": s.socket_timeout_s,
        "socket_connect_timeout": s.socket_timeout_s,
        **s.redis_options,
    }
    factory = redis.asyncio.Redis if is_async else redis.Redis
    try:
        return factory.from_url(s.redis_url, **options)
    except (ValueError, TypeError) as exc:
        # redis-py's message may quote the URL (and its password): name the
        # setting only.
        raise ImproperlyConfigured(
            f"XSM['REDIS_URL'] or XSM['REDIS_OPTIONS'] is invalid ({type(exc).__name__})",
        ) from exc


async def _close_at_loop_end(client: Any) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.aclose()


def tie_to_loop(client: Any) -> AsyncGenerator[None, None]:
    """Close ``client`` when the running loop shuts down.

    asyncio connections cannot outlive their loop, and under WSGI Django
    runs each async view on a loop of its own (asgiref's ``async_to_sync``
    uses ``asyncio.run``). ``asyncio.run``, ``asyncio.Runner`` and ASGI
    servers call ``loop.shutdown_asyncgens()`` before closing a loop, which
    finalises every async generator started on it: a generator parked at its
    ``yield`` with ``aclose()`` in its ``finally`` therefore closes the
    client's connections on the loop that owns them, instead of leaking them
    to the garbage collector.
    """
    closer = _close_at_loop_end(client)
    # Calling asend() runs the loop's firstiter hook, which registers the
    # generator with the running loop; stepping the returned awaitable once
    # parks the generator at its yield (it awaits nothing before it).
    step = closer.asend(None)
    try:
        step.send(None)
    except StopIteration:
        pass
    return closer
