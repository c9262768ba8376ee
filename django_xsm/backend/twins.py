"""Asyncio twins of blocking Redis clients (the same server, database,
cluster or Sentinel service), for the async views of a process whose
connection came from a django-redis cache alias, which hands out blocking
clients only.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm.redis import is_cluster

__all__ = ["ask_each_sentinel_once", "async_twin", "is_cluster"]


# Connection options that mean the same for redis.Redis and redis.asyncio;
# everything else in a sync pool's kwargs (parsers, retry objects, event
# handlers) has a sync-only type and must not be copied to an async pool.
# The last four are fakeredis' connection options.
_PORTABLE_OPTIONS = frozenset([
    "host", "port", "db", "path", "username", "password", "socket_timeout",
    "socket_connect_timeout", "socket_keepalive", "socket_keepalive_options",
    "retry_on_timeout", "encoding", "encoding_errors", "client_name", "health_check_interval",
    "protocol", "ssl_keyfile", "ssl_certfile", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_data",
    "ssl_check_hostname", "ssl_min_version", "ssl_ciphers",
    "server", "version", "server_type", "lua_modules",
])  # fmt: skip
#: Where a connection goes: a topology's client decides it (the sentinels
#: name the primary; the cluster's slot map names the nodes).
_ADDRESS = ("host", "port", "path")


def ask_each_sentinel_once(options: Mapping[str, Any], *, is_async: bool) -> dict[str, Any]:
    """The options of the clients of the sentinels (``sentinel_kwargs``),
    with retries off unless they ask for their own (a ``retry``, even None,
    a true ``retry_on_timeout`` or a non-empty ``retry_on_error`` is kept).

    redis-py 6 and later retry such a client by default, which held a
    discovery some 45 s on three silent sentinels with a 1 s timeout;
    without retries it takes at most each sentinel's connect and socket
    timeouts (docs/settings.md, Unreachable sentinels).
    """
    found = dict(options)
    if "retry" in found or found.get("retry_on_timeout") or found.get("retry_on_error"):
        return found
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    found["retry"] = (AsyncRetry if is_async else Retry)(NoBackoff(), 0)
    return found


def _portable(kwargs: Mapping[str, Any], *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k in _PORTABLE_OPTIONS and k not in drop}


def _uses_tls(connection_class: Any) -> bool:
    import redis.connection

    return isinstance(connection_class, type) and issubclass(
        connection_class, redis.connection.SSLConnection
    )


def _cluster_twin(client: Any) -> Any:
    """An asyncio cluster client seeded with the nodes the blocking one
    knows, with those of its options redis-py's asyncio ``RedisCluster`` names."""
    import redis.asyncio.cluster

    manager = client.nodes_manager
    known = list(manager.startup_nodes.values()) or client.get_primaries()
    nodes = [redis.asyncio.cluster.ClusterNode(n.host, n.port) for n in known]
    accepted = inspect.signature(redis.asyncio.cluster.RedisCluster).parameters
    options = manager.connection_kwargs
    kwargs = {
        k: v for k, v in _portable(options, drop=_ADDRESS).items() if k in accepted and k != "db"
    }
    if "max_connections" in options:
        kwargs["max_connections"] = options["max_connections"]
    if options.get("ssl") or _uses_tls(options.get("connection_class")):
        kwargs["ssl"] = True
    return redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **kwargs)


def _sentinel_twin(pool: Any) -> Any:
    """An asyncio client on the primary the blocking ``pool``'s sentinels
    name: the same sentinels (with their own options), the same service,
    the same master options. The pool's ``host`` is the service name that
    django-redis read from its URL, not an address: it is dropped."""
    import redis.asyncio.sentinel

    manager = pool.sentinel_manager
    hosts = [
        (c.connection_pool.connection_kwargs["host"], c.connection_pool.connection_kwargs["port"])
        for c in manager.sentinels
    ]
    given = manager.sentinel_kwargs or {}
    sentinel_kwargs = _portable(given, drop=_ADDRESS)
    if given.get("ssl"):  # a redis.Redis argument of the sentinels' clients
        sentinel_kwargs["ssl"] = True
    # The cache's retry objects are sync-only: the twin asks each sentinel
    # once (unless retry_on_timeout was given), whatever the cache does.
    sentinel_kwargs = ask_each_sentinel_once(sentinel_kwargs, is_async=True)
    master = _portable(pool.connection_kwargs, drop=_ADDRESS)
    if _uses_tls(pool.connection_class):
        master["ssl"] = True
    twin: Any = redis.asyncio.sentinel.Sentinel(hosts, sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    return twin.master_for(pool.service_name, **master)


def async_twin(client: Any) -> Any:
    """An asyncio client on the same server as the sync ``client``: a
    cluster client on the same nodes for a cluster, a Sentinel client on the
    same sentinels and service for a Sentinel-managed primary."""
    import redis.asyncio
    import redis.connection
    import redis.sentinel

    if is_cluster(client):
        return _cluster_twin(client)
    pool = client.connection_pool
    if isinstance(pool, redis.sentinel.SentinelConnectionPool):
        return _sentinel_twin(pool)
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
    kwargs = _portable(pool.connection_kwargs)
    async_pool = redis.asyncio.ConnectionPool(connection_class=async_cls, **kwargs)
    # from_pool: the client owns the pool, so aclose() closes its connections.
    return redis.asyncio.Redis.from_pool(async_pool)
