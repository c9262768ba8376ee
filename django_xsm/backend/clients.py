"""Redis clients for the Django layer: from a URL (one server, or a Redis
Cluster with ``REDIS_CLUSTER``), from ``SENTINEL`` (the primary a set of
sentinels names), from a django-redis cache alias, or the embedded
in-process fakeredis; and the asyncio twin of each.

:mod:`django_xsm.backend.build` decides which one a process uses and caches
it, after :func:`django_xsm.backend.readiness.require_usable` has accepted
the settings; this module only builds clients. Nothing here ever puts a
host, port or password into an error message (URLs may carry credentials).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm import conf
from django_xsm.exceptions import StoreUnavailableError
from django_xsm.redis import memory

from .twins import ask_each_sentinel_once, async_twin, is_cluster

__all__ = [
    "ClusterConnectionFactory",
    "NotAClusterNode",
    "aclose",
    "aclose_sentinels",
    "async_twin",
    "cache_client",
    "embedded_client",
    "is_cluster",
    "reset_embedded",
    "sentinel_client",
    "sentinel_service",
    "tie_to_loop",
    "url_client",
]

logger = logging.getLogger("django_xsm")

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
    if _embedded_server is None:
        _embedded_server = memory.new_server()
        if not _embedded_logged:
            _embedded_logged = True
            logger.warning(
                "django-xsm is using an in-process fakeredis store (no XSM REDIS_URL, "
                "CACHE_ALIAS or SENTINEL): state lives in this process only and is lost on "
                "restart; set XSM['REDIS_URL'] to share it between workers"
            )
    return memory.fakeredis_client(_embedded_server, is_async=is_async)


def cache_client(alias: str) -> Any:
    """The write client of the django-redis cache ``alias`` (one that
    :func:`django_xsm.backend.readiness.cache_alias_problem` accepted)."""
    from django_redis import get_redis_connection
    from redis.exceptions import RedisClusterException, RedisError

    try:
        return get_redis_connection(alias, write=True)
    except NotImplementedError as exc:
        raise ImproperlyConfigured(
            f"XSM['CACHE_ALIAS']: cache {alias!r} cannot hand out a Redis client "
            "(sharded or not django-redis); use REDIS_URL"
        ) from exc
    except (RedisClusterException, RedisError) as exc:  # a cluster client reads its slot map
        raise _cluster_start_error(exc, alias=alias) from exc


class ClusterConnectionFactory:
    """A django-redis ``CONNECTION_FACTORY`` whose clients are
    ``redis.cluster.RedisCluster``, so a cache (and ``CACHE_ALIAS``) can use
    a Redis Cluster (docs/django.md, Sharing a django-redis cache).

    django-redis 7 gives each client one pool for ``LOCATION``; a cluster
    client needs one per node. This one seeds a cluster client with the
    ``LOCATION`` node and shares it in the process. It reads ``USERNAME``,
    ``PASSWORD``, ``SOCKET_TIMEOUT``, ``SOCKET_CONNECT_TIMEOUT`` (as
    django-redis does) and ``REDIS_CLIENT_KWARGS``.
    """

    _clients: dict[str, Any] = {}
    _lock = threading.Lock()

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = dict(options)

    def make_connection_params(self, url: str) -> dict[str, Any]:
        params: dict[str, Any] = {"url": url}
        for option in ("USERNAME", "PASSWORD", "SOCKET_TIMEOUT", "SOCKET_CONNECT_TIMEOUT"):
            if self.options.get(option):
                params[option.lower()] = self.options[option]
        params.update(self.options.get("REDIS_CLIENT_KWARGS") or {})
        return params

    def connect(self, url: str) -> Any:
        return self.get_connection(self.make_connection_params(url))

    def get_connection(self, params: Mapping[str, Any]) -> Any:
        import redis.cluster

        key = repr(sorted(params.items()))  # held in memory only, never shown
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                rest = {k: v for k, v in params.items() if k != "url"}
                client = redis.cluster.RedisCluster.from_url(params["url"], **rest)
                self._clients[key] = client
        return client

    def disconnect(self, connection: Any) -> None:
        """Close the sockets to every node (the client reconnects on use)."""
        connection.disconnect_connection_pools()

    @classmethod
    def close_all(cls) -> None:
        """Close and forget every cluster client built so far (tests)."""
        with cls._lock:
            found = list(cls._clients.values())
            cls._clients.clear()
        for client in found:
            client.close()


def sentinel_service(client: Any) -> str | None:
    """The service name of a client on a Sentinel-managed primary, else None."""
    import redis.asyncio.sentinel
    import redis.sentinel

    pool = getattr(client, "connection_pool", None)
    pools = (redis.sentinel.SentinelConnectionPool, redis.asyncio.sentinel.SentinelConnectionPool)
    return str(pool.service_name) if isinstance(pool, pools) else None


def _timeouts(s: conf.XsmSettings) -> dict[str, float]:
    return {"socket_timeout": s.socket_timeout_s, "socket_connect_timeout": s.socket_timeout_s}


def url_client(s: conf.XsmSettings, *, is_async: bool) -> Any:
    """A client from ``REDIS_URL``: a cluster client when ``REDIS_CLUSTER``.

    The blocking cluster client reads the slot map when it is built, so an
    unreachable cluster raises ``StoreUnavailableError`` here (nothing is
    cached: the next call tries again); the asyncio one does that on its
    first command.
    """
    import redis
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.cluster
    from redis.exceptions import RedisClusterException, RedisError

    assert s.redis_url is not None
    options: dict[str, Any] = {**_timeouts(s), **s.redis_options}
    factory: Any
    if s.redis_cluster:
        factory = redis.asyncio.cluster.RedisCluster if is_async else redis.cluster.RedisCluster
    else:
        factory = redis.asyncio.Redis if is_async else redis.Redis
    try:
        return factory.from_url(s.redis_url, **options)
    except (ValueError, TypeError) as exc:
        # redis-py's message may quote the URL (and its password): name the
        # setting only.
        raise ImproperlyConfigured(
            f"XSM['REDIS_URL'] or XSM['REDIS_OPTIONS'] is invalid ({type(exc).__name__})",
        ) from exc
    except (RedisClusterException, RedisError) as exc:
        raise _cluster_start_error(exc) from exc


class NotAClusterNode(ImproperlyConfigured):
    """A cluster client was configured for a server that is not a cluster
    node (``check --deploy`` reports it as ``xsm.E012``)."""


def _cluster_start_error(exc: BaseException, *, alias: str | None = None) -> Exception:
    """What a blocking cluster client that could not read the slot map at
    start-up means, without the node addresses redis-py puts in its text."""
    from redis.exceptions import RedisClusterException

    cause = exc.__cause__
    if isinstance(cause, RedisClusterException) and "not enabled" in str(cause):
        if alias is not None:
            return NotAClusterNode(
                f"This Redis is not a cluster node: cache {alias!r} has a cluster client "
                "(ClusterConnectionFactory) for a server without cluster mode; drop the "
                "CONNECTION_FACTORY, or point LOCATION at a node of the cluster"
            )
        return NotAClusterNode(
            "This Redis is not a cluster node: drop XSM['REDIS_CLUSTER'], or point "
            "XSM['REDIS_URL'] at a node of the cluster"
        )
    reason = type(cause if isinstance(cause, BaseException) else exc).__name__
    return StoreUnavailableError(
        f"Redis Cluster could not be reached at start-up ({reason})", cause=reason
    )


def sentinel_client(s: conf.XsmSettings, *, is_async: bool) -> Any:
    """A client on the primary that ``SENTINEL``'s sentinels name.

    redis-py asks the sentinels for the primary's address whenever it opens
    a connection, and drops connections to a demoted primary, so after a
    failover the next connection goes to the new one. ``SOCKET_TIMEOUT_S``
    is both legs' timeout unless ``OPTIONS`` / ``SENTINEL_OPTIONS`` set
    their own; each sentinel is asked once per discovery
    (docs/settings.md, Unreachable sentinels). Building it does no I/O.
    """
    import redis.asyncio.sentinel
    import redis.sentinel

    cfg = s.sentinel
    assert cfg is not None
    module: Any = redis.asyncio.sentinel if is_async else redis.sentinel
    try:
        legs = ask_each_sentinel_once({**_timeouts(s), **cfg.sentinel_options}, is_async=is_async)
        manager = module.Sentinel(list(cfg.hosts), sentinel_kwargs=legs)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            f"XSM['SENTINEL']['SENTINEL_OPTIONS'] is invalid ({type(exc).__name__}: an option "
            "redis.Redis does not take, or a value of the wrong type)"
        ) from exc
    client = manager.master_for(cfg.service, db=cfg.db, **{**_timeouts(s), **cfg.options})
    pool = client.connection_pool
    try:
        # The options reach a connection only when it opens: build one
        # (no I/O) so a misspelt option fails here, not on the first request.
        pool.connection_class(**pool.connection_kwargs)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            f"XSM['SENTINEL']['OPTIONS'] is invalid ({type(exc).__name__}: an option a "
            "redis-py connection does not take, or a value of the wrong type)"
        ) from exc
    return client


async def aclose(client: Any) -> None:
    """Close an asyncio client and, for a Sentinel client, the connections
    to its sentinels (``master_for`` clients do not own those)."""
    await client.aclose()
    pool = getattr(client, "connection_pool", None)
    manager = getattr(pool, "sentinel_manager", None)
    if manager is not None:
        await aclose_sentinels(manager)


async def aclose_sentinels(manager: Any) -> None:
    """Close an asyncio ``Sentinel``'s clients of its sentinels: with
    ``Sentinel.aclose()`` where redis-py has one (8.x), else each client
    as it does."""
    close = getattr(manager, "aclose", None)
    if close is not None:
        await close()
        return
    for sentinel in manager.sentinels:
        await sentinel.aclose()


async def _close_at_loop_end(client: Any) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await aclose(client)


def tie_to_loop(client: Any) -> AsyncGenerator[None, None]:
    """Close ``client`` when the running loop shuts down.

    asyncio connections cannot outlive their loop, and under WSGI each async
    view runs on a loop of its own (asgiref's ``async_to_sync``).
    ``asyncio.run``, ``asyncio.Runner`` and ASGI servers call
    ``loop.shutdown_asyncgens()`` before closing a loop: that finalises the
    generator parked here at its ``yield``, whose ``finally`` closes the
    connections on the loop that owns them.
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
