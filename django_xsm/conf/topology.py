"""``REDIS_CLUSTER``, ``SENTINEL`` and ``DURABILITY``: which Redis topology
the app talks to and how durable a commit must be. Beyond types, the checks
are about combinations (a cluster needs a seed URL; Sentinel brings its own
connection options) and secrets: ``SENTINEL``'s ``OPTIONS`` and
``SENTINEL_OPTIONS`` carry passwords, so a message shows their key names
and types, never a value. Several sources at once is a connection problem
(``xsm.E003``, :mod:`django_xsm.backend.readiness`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django_xsm.brief import brief

from .parsing import Problems, check_keys, choice, fail, number
from .values import SENTINEL_DEFAULTS, Durability, Sentinel, XsmSettings

__all__ = [
    "MAX_MIN_REPLICAS",
    "MAX_WAIT_MS",
    "commit_socket_timeout",
    "durability",
    "durability_fits",
    "redis_cluster",
    "sentinel",
    "wait_fits",
]

#: The most replicas a commit may wait for. ``WAIT`` takes any number, but
#: a deployment asking more than 16 replicas to acknowledge every commit
#: has mistyped (or wants a different database).
MAX_MIN_REPLICAS = 16
#: The longest a commit may wait for its replicas: a request holds its
#: worker that long, so more than a minute is a mistake.
MAX_WAIT_MS = 60_000

_EXAMPLE = "e.g. {'HOSTS': [('10.0.0.7', 26379), ('10.0.0.8', 26379)], 'SERVICE': 'mymaster'}"
#: Connection options that the topology decides, with where they belong.
_MASTER_OWNED = {
    "host": "the sentinels name the primary's address",
    "port": "the sentinels name the primary's address",
    "db": "use XSM['SENTINEL']['DB']",
    "decode_responses": "snapshots are bytes; django-xsm needs decode_responses=False",
    "connection_pool": "the Sentinel client builds its own pool",
    "url": "the sentinels name the primary's address",
}
_SENTINEL_OWNED = {
    "host": "list the sentinels in XSM['SENTINEL']['HOSTS']",
    "port": "list the sentinels in XSM['SENTINEL']['HOSTS']",
    "connection_pool": "the Sentinel client builds one per sentinel",
}


def redis_cluster(value: Any, *, redis_url: Any, cache_alias: Any, sentinel_set: bool) -> bool:
    """``REDIS_CLUSTER``: a bool, True only with ``REDIS_URL`` (a seed node).

    With ``CACHE_ALIAS`` the cache's own client decides (a django-redis
    cache whose client is a ``redis.cluster.RedisCluster`` is used as one),
    so the flag would only be able to disagree with it.
    """
    flag = bool(choice(value, (True, False), "REDIS_CLUSTER"))
    if not flag or redis_url:
        return flag
    if cache_alias:
        raise fail(
            "applies to REDIS_URL only",
            "REDIS_CLUSTER",
            hint="drop it: with CACHE_ALIAS the cache's client decides, and a django-redis "
            "cache whose client is a redis.cluster.RedisCluster is used as a cluster",
        )
    if sentinel_set:
        raise fail(
            "a Sentinel-managed primary is not a Redis Cluster",
            "REDIS_CLUSTER",
            hint="drop REDIS_CLUSTER to use SENTINEL, or replace SENTINEL with "
            "REDIS_URL pointing at any cluster node",
        )
    raise fail(
        "needs XSM['REDIS_URL'], the address of any node of the cluster",
        "REDIS_CLUSTER",
        hint="e.g. 'REDIS_URL': 'redis://10.0.0.5:7000/0'; the client discovers the others",
    )


def _hosts(value: Any) -> tuple[tuple[str, int], ...]:
    parts = ("SENTINEL", "HOSTS")
    if value is None:
        raise fail(
            "missing",
            *parts,
            hint="list the sentinels as (host, port) pairs, e.g. "
            "[('10.0.0.7', 26379), ('10.0.0.8', 26379)]",
        )
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple) or not value:
        raise fail(
            f"expected a non-empty list of (host, port) pairs, got {brief(value)}",
            *parts,
            hint="e.g. [('10.0.0.7', 26379), ('10.0.0.8', 26379)]",
        )
    hosts = []
    for i, pair in enumerate(value):
        where = (*parts, i)
        if isinstance(pair, str | bytes) or not isinstance(pair, list | tuple) or len(pair) != 2:
            raise fail(
                f"expected a (host, port) pair, got {brief(pair)}",
                *where,
                hint="e.g. ('10.0.0.7', 26379)",
            )
        host, port = pair
        if not isinstance(host, str) or not host or len(host) > 255 or host != host.strip():
            raise fail(f"expected a host name or address, got {brief(host)}", *where)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise fail(f"expected a port from 1 to 65535, got {brief(port)}", *where)
        hosts.append((host, port))
    return tuple(hosts)


def _service(value: Any) -> str:
    if value is None:
        raise fail(
            "missing",
            "SENTINEL",
            "SERVICE",
            hint="the name the sentinels monitor the primary under (their "
            "'sentinel monitor <name> ...' line), e.g. 'mymaster'",
        )
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise fail(f"expected a non-empty service name, got {brief(value)}", "SENTINEL", "SERVICE")
    return value


def _options(value: Any, name: str, owned: Mapping[str, str]) -> dict[str, Any]:
    """A dict of redis-py connection keyword arguments. Values are never
    shown: they hold passwords."""
    parts = ("SENTINEL", name)
    if not isinstance(value, Mapping):
        raise fail(
            f"expected a dict of redis-py connection options, got {type(value).__name__}",
            *parts,
            hint="e.g. {'password': ..., 'ssl': True}",
        )
    for key in value:
        if not isinstance(key, str) or not key.isidentifier():
            raise fail(
                f"option names are keyword arguments, got {brief(key)}",
                *parts,
            )
        if key in owned:
            raise fail(f"{key!r} cannot be set here", *parts, hint=owned[key])
    return dict(value)


def sentinel(value: Any, into: Problems) -> Sentinel | None:
    """``SENTINEL``: None, or a dict with HOSTS and SERVICE (DB, OPTIONS
    and SENTINEL_OPTIONS default to 0, {} and {}). Every problem is
    recorded in ``into``; the result is None when there was one."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        into.report(
            f"expected a dict or None, got {type(value).__name__}", "SENTINEL", hint=_EXAMPLE
        )
        return None
    check_keys(value, SENTINEL_DEFAULTS, "SENTINEL", into=into)
    given = {**SENTINEL_DEFAULTS, **{k: v for k, v in value.items() if k in SENTINEL_DEFAULTS}}
    before = len(into.found)
    hosts = into.take(_hosts, given["HOSTS"], default=())
    service = into.take(_service, given["SERVICE"], default="")
    db = into.take(number, given["DB"], "SENTINEL", "DB", integer=True, default=0)
    options = into.take(_options, given["OPTIONS"], "OPTIONS", _MASTER_OWNED, default={})
    sentinel_options = into.take(
        _options, given["SENTINEL_OPTIONS"], "SENTINEL_OPTIONS", _SENTINEL_OWNED, default={}
    )
    if len(into.found) > before:
        return None
    return Sentinel(
        hosts=hosts, service=service, db=db, options=options, sentinel_options=sentinel_options
    )


def _timeout_ms(value: Any) -> int:
    parts = ("DURABILITY", "TIMEOUT_MS")
    if value == 0 and not isinstance(value, bool):
        raise fail(
            "0 would make every commit wait forever (Redis WAIT with timeout 0 blocks "
            "until enough replicas acknowledge)",
            *parts,
            hint=f"give 1 to {MAX_WAIT_MS} ms, e.g. 100",
        )
    found: int = number(value, *parts, integer=True, minimum=1, maximum=MAX_WAIT_MS)
    return found


def durability(value: Mapping[str, Any], into: Problems) -> Durability:
    """``DURABILITY`` (already merged with its defaults): how many replicas
    must acknowledge each commit, and how long to wait for them."""
    replicas = into.take(
        number,
        value["MIN_REPLICAS"],
        "DURABILITY",
        "MIN_REPLICAS",
        integer=True,
        maximum=MAX_MIN_REPLICAS,
        hint=f"0 does not wait; at most {MAX_MIN_REPLICAS} replicas can be asked to "
        "acknowledge each commit",
        default=0,
    )
    timeout = into.take(_timeout_ms, value["TIMEOUT_MS"], default=1)
    return Durability(min_replicas=replicas, timeout_ms=timeout)


def durability_fits(s: XsmSettings) -> None:
    """The embedded fakeredis has no replicas: with ``MIN_REPLICAS`` above
    0 every commit there would fail, so say so at start-up."""
    if s.durability.min_replicas and s.uses_embedded:
        raise fail(
            f"is {s.durability.min_replicas} but the store is the embedded fakeredis, "
            "which has no replicas: every commit would fail",
            "DURABILITY",
            "MIN_REPLICAS",
            hint="keep 0 where the embedded store runs (tests, DEBUG), or set REDIS_URL, "
            "CACHE_ALIAS or SENTINEL",
        )


#: A setting that is not there (``None`` is there: it means no timeout).
_ABSENT = object()


def _seconds(value: Any) -> float | None:
    """A socket timeout as redis-py applies it, in seconds; None for no
    timeout (``None``) and for a value redis-py refuses when it builds the
    client (reported there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _query_timeout(url: Any) -> Any:
    """``socket_timeout`` of a Redis URL's query (redis-py lets it win over
    keyword arguments): a number, None when redis-py would refuse it, or
    ``_ABSENT``. The URL itself is never shown (it may hold a password)."""
    if not isinstance(url, str):
        return _ABSENT
    try:
        found = parse_qs(urlsplit(url).query).get("socket_timeout")
    except ValueError:
        return None
    if not found:
        return _ABSENT
    try:
        return float(found[0])
    except ValueError:
        return None


def _cache_sources(alias: str, caches: Mapping[str, Any] | None) -> list[tuple[Any, str]]:
    """Where django-redis takes the socket timeout of cache ``alias``'s
    write connection, strongest first: the first ``LOCATION``'s query, the
    pool's keyword arguments, ``OPTIONS['SOCKET_TIMEOUT']``. Without them
    django-redis sets none (``xsm.W005``)."""
    cache = (caches or {}).get(alias)
    if not isinstance(cache, Mapping):
        return []  # no such cache: xsm.E005
    options = cache.get("OPTIONS")
    options = options if isinstance(options, Mapping) else {}
    pool = options.get("CONNECTION_POOL_KWARGS")
    pool = pool if isinstance(pool, Mapping) else {}
    location = cache.get("LOCATION")
    if isinstance(location, str):
        location = location.split(",")[0]
    elif isinstance(location, list | tuple) and location:
        location = location[0]
    where = f"CACHES[{alias!r}]"
    return [
        (_query_timeout(location), f"the socket_timeout in the query of {where}['LOCATION']"),
        (
            pool.get("socket_timeout", _ABSENT),
            f"{where}['OPTIONS']['CONNECTION_POOL_KWARGS']['socket_timeout']",
        ),
        (options.get("SOCKET_TIMEOUT", _ABSENT), f"{where}['OPTIONS']['SOCKET_TIMEOUT']"),
    ]


def commit_socket_timeout(
    s: XsmSettings, caches: Mapping[str, Any] | None
) -> tuple[float, str] | None:
    """The socket (read) timeout of the connection commits run on, in
    seconds, and the setting it comes from, the strongest first as redis-py
    and django-redis apply them (docs/settings.md, ``TIMEOUT_MS`` and the
    socket timeout; ``caches`` is Django's ``CACHES``); None when that
    connection has none, or it cannot be known from the settings.
    """
    sources: list[tuple[Any, str]]
    if s.redis_url:
        sources = [
            (_query_timeout(s.redis_url), "the socket_timeout in the query of XSM['REDIS_URL']"),
            (
                s.redis_options.get("socket_timeout", _ABSENT),
                "XSM['REDIS_OPTIONS']['socket_timeout']",
            ),
            (s.socket_timeout_s, "XSM['SOCKET_TIMEOUT_S']"),
        ]
    elif s.cache_alias:
        sources = _cache_sources(s.cache_alias, caches)
    elif s.sentinel is not None:
        sources = [
            (
                s.sentinel.options.get("socket_timeout", _ABSENT),
                "XSM['SENTINEL']['OPTIONS']['socket_timeout']",
            ),
            (s.socket_timeout_s, "XSM['SOCKET_TIMEOUT_S']"),
        ]
    else:
        return None
    for value, where in sources:
        if value is not _ABSENT:
            seconds = _seconds(value)
            return None if seconds is None else (seconds, where)
    return None


def wait_fits(s: XsmSettings, caches: Mapping[str, Any] | None) -> None:
    """With ``MIN_REPLICAS`` above 0, ``TIMEOUT_MS`` must be at most half
    the socket timeout of the commits' connection: a ``WAIT`` that outlasts
    it ends as ``StoreUnavailableError`` instead of ``NotDurableError``
    (docs/settings.md, ``TIMEOUT_MS`` and the socket timeout).
    """
    wait_ms = s.durability.timeout_ms
    if not s.durability.min_replicas:
        return
    found = commit_socket_timeout(s, caches)
    if found is None:
        return
    seconds, where = found
    most = round(seconds * 1000) // 2
    if wait_ms <= most:
        return
    lower = f"lower TIMEOUT_MS to at most {most} ms, or " if most >= 1 else ""
    raise fail(
        f"{wait_ms} ms is more than half the socket timeout of the connection commits run on "
        f"({seconds:g} s, from {where}): when the replicas lag, the socket would time out "
        "before WAIT answers, and the commit would fail as unavailable instead of not durable",
        "DURABILITY",
        "TIMEOUT_MS",
        hint=f"{lower}raise {where} to at least {wait_ms * 2 / 1000:g} s",
    )
