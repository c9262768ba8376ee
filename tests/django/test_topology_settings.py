"""REDIS_CLUSTER, SENTINEL and DURABILITY without servers: every validation
branch, the connection problems they add, the clients and descriptions
built from them (built, never connected), the asyncio twins of django-redis
Sentinel clients, and what the deploy checks and ``xsm_namespace`` say off
a cluster. The same settings against real servers: tests/topology."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.sentinel
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from django_xsm import backend as stores
from django_xsm import checks, conf
from django_xsm.backend import clients, twins
from django_xsm.backend.readiness import (
    NamespaceInfo,
    bucket_problem,
    cluster_node_problem,
    connection_problems,
    namespace_info,
)
from django_xsm.checks import check_deploy, check_settings
from django_xsm.exceptions import StoreError, StoreUnavailableError
from django_xsm.redis import LAYOUT_VERSION
from tests.topology.sentinel import close_sentinels

SENTINEL = {"HOSTS": [("127.0.0.1", 1), ["127.0.0.1", 2]], "SERVICE": "mymaster"}


def problems(value: dict[str, Any]) -> list[str]:
    """What parsing ``value`` refuses (every problem, in order)."""
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse(value, debug=False)
    return list(info.value.problems)


def only(value: dict[str, Any]) -> str:
    [problem] = problems(value)
    return problem


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


async def _async_backend() -> stores.AsyncBackend:
    return stores.get_async_backend()


def async_backend() -> stores.AsyncBackend:
    """The asyncio backend as a fresh loop builds it (nothing connects)."""
    return asyncio.run(_async_backend())


# --- defaults ---------------------------------------------------------------------------


def test_defaults() -> None:
    s = conf.parse({"PREFIX": "shop"}, debug=False)
    assert s.redis_cluster is False
    assert s.sentinel is None
    assert s.durability == conf.Durability(min_replicas=0, timeout_ms=100)
    assert conf.DEFAULTS["DURABILITY"] == {"MIN_REPLICAS": 0, "TIMEOUT_MS": 100}
    assert conf.DEFAULTS["REDIS_CLUSTER"] is False and conf.DEFAULTS["SENTINEL"] is None


# --- REDIS_CLUSTER ----------------------------------------------------------------------


def test_redis_cluster_with_a_url() -> None:
    s = conf.parse({"REDIS_URL": "redis://10.0.0.5:7000/0", "REDIS_CLUSTER": True}, debug=False)
    assert s.redis_cluster is True


@pytest.mark.parametrize("value", [1, "yes", None, 0.0])
def test_redis_cluster_must_be_a_bool(value: Any) -> None:
    assert only({"REDIS_URL": "redis://h/0", "REDIS_CLUSTER": value}) == (
        f"XSM['REDIS_CLUSTER']: expected one of True, False, got {value!r}"
    )


@pytest.mark.parametrize(
    ("others", "says"),
    [
        ({}, "needs XSM['REDIS_URL'], the address of any node of the cluster"),
        ({"CACHE_ALIAS": "default"}, "applies to REDIS_URL only (drop it: with CACHE_ALIAS"),
        ({"SENTINEL": SENTINEL}, "a Sentinel-managed primary is not a Redis Cluster"),
    ],
)
def test_redis_cluster_only_with_a_url(others: dict[str, Any], says: str) -> None:
    problem = only({"REDIS_CLUSTER": True, **others})
    assert problem.startswith("XSM['REDIS_CLUSTER']: ") and says in problem


# --- SENTINEL ---------------------------------------------------------------------------


def test_sentinel_is_typed_with_its_defaults() -> None:
    s = conf.parse({"SENTINEL": SENTINEL}, debug=False)
    assert s.sentinel == conf.Sentinel(
        hosts=(("127.0.0.1", 1), ("127.0.0.1", 2)),  # lists accepted, tuples kept
        service="mymaster",
        db=0,
        options={},
        sentinel_options={},
    )
    assert s.has_server and not s.uses_embedded


def test_sentinel_repr_hides_the_passwords() -> None:
    value = {
        **SENTINEL,
        "DB": 2,
        "OPTIONS": {"password": "hunter2", "ssl": True},
        "SENTINEL_OPTIONS": {"password": "sentinel-pw"},
    }
    s = conf.parse({"SENTINEL": value}, debug=False)
    assert s.sentinel is not None and s.sentinel.options["password"] == "hunter2"
    assert s.sentinel.db == 2
    assert "hunter2" not in repr(s.sentinel) and "sentinel-pw" not in repr(s.sentinel)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("mymaster", "XSM['SENTINEL']: expected a dict or None, got str"),
        ({"SERVICE": "m"}, "XSM['SENTINEL']['HOSTS']: missing (list the sentinels"),
        ({"HOSTS": [("h", 1)]}, "XSM['SENTINEL']['SERVICE']: missing (the name the sentinels"),
        ({"HOSTS": "h:26379", "SERVICE": "m"}, "['HOSTS']: expected a non-empty list of (host"),
        ({"HOSTS": [], "SERVICE": "m"}, "['HOSTS']: expected a non-empty list of (host, port)"),
        ({"HOSTS": ["h:1"], "SERVICE": "m"}, "['HOSTS'][0]: expected a (host, port) pair"),
        ({"HOSTS": [("h", 1, 2)], "SERVICE": "m"}, "['HOSTS'][0]: expected a (host, port) pair"),
        ({"HOSTS": [("h", 1), ("", 1)], "SERVICE": "m"}, "['HOSTS'][1]: expected a host name"),
        ({"HOSTS": [(" h", 1)], "SERVICE": "m"}, "['HOSTS'][0]: expected a host name"),
        ({"HOSTS": [("h", 0)], "SERVICE": "m"}, "['HOSTS'][0]: expected a port from 1 to 65535"),
        ({"HOSTS": [("h", 65536)], "SERVICE": "m"}, "expected a port from 1 to 65535, got 65536"),
        ({"HOSTS": [("h", True)], "SERVICE": "m"}, "expected a port from 1 to 65535, got True"),
        ({"HOSTS": [("h", "26379")], "SERVICE": "m"}, "expected a port from 1 to 65535"),
        ({"HOSTS": [("h", 1)], "SERVICE": ""}, "['SERVICE']: expected a non-empty service name"),
        ({"HOSTS": [("h", 1)], "SERVICE": 7}, "['SERVICE']: expected a non-empty service name"),
        ({**SENTINEL, "DB": -1}, "XSM['SENTINEL']['DB']: expected an int from 0"),
        ({**SENTINEL, "DB": True}, "XSM['SENTINEL']['DB']: expected an int from 0"),
        ({**SENTINEL, "SERVIC": "m"}, "Unknown setting XSM['SENTINEL']['SERVIC'] (did you mean"),
    ],
)
def test_sentinel_refusals_name_the_setting(value: Any, expected: str) -> None:
    assert expected in only({"SENTINEL": value})


@pytest.mark.parametrize("name", ["OPTIONS", "SENTINEL_OPTIONS"])
def test_sentinel_options_must_be_dicts_and_never_echo_their_values(name: str) -> None:
    problem = only({"SENTINEL": {**SENTINEL, name: "hunter2"}})
    assert problem.startswith(f"XSM['SENTINEL'][{name!r}]: expected a dict of redis-py")
    assert "hunter2" not in problem
    problem = only({"SENTINEL": {**SENTINEL, name: {"pass word": "hunter2"}}})
    assert "option names are keyword arguments" in problem and "hunter2" not in problem


@pytest.mark.parametrize(
    ("name", "key", "hint"),
    [
        ("OPTIONS", "host", "the sentinels name the primary's address"),
        ("OPTIONS", "port", "the sentinels name the primary's address"),
        ("OPTIONS", "db", "use XSM['SENTINEL']['DB']"),
        ("OPTIONS", "decode_responses", "django-xsm needs decode_responses=False"),
        ("SENTINEL_OPTIONS", "host", "list the sentinels in XSM['SENTINEL']['HOSTS']"),
    ],
)
def test_sentinel_options_the_topology_decides_are_refused(name: str, key: str, hint: str) -> None:
    problem = only({"SENTINEL": {**SENTINEL, name: {key: "x", "password": "hunter2"}}})
    assert problem.startswith(f"XSM['SENTINEL'][{name!r}]: {key!r} cannot be set here (")
    assert hint in problem
    assert "hunter2" not in problem


def test_redis_options_do_not_apply_to_sentinel() -> None:
    problem = only({"SENTINEL": SENTINEL, "REDIS_OPTIONS": {"password": "hunter2"}})
    assert problem.startswith("XSM['REDIS_OPTIONS']: is not used with SENTINEL")
    assert "XSM['SENTINEL']['OPTIONS']" in problem and "hunter2" not in problem


def test_every_sentinel_problem_is_reported_at_once() -> None:
    found = problems(
        {
            "SENTINEL": {"HOSTS": [("h", 0)], "SERVICE": "", "DB": -1, "OPTIONS": []},
            "DURABILITY": {"TIMEOUT_MS": 0},
        }
    )
    named = ["['HOSTS'][0]", "['SERVICE']", "['DB']", "['OPTIONS']", "['TIMEOUT_MS']"]
    assert len(found) == 5 and all(n in p for n, p in zip(named, found, strict=True))


# --- DURABILITY -------------------------------------------------------------------------


def test_durability_merges_with_its_defaults() -> None:
    s = conf.parse({"DURABILITY": {"MIN_REPLICAS": 1}}, debug=False)
    assert s.durability == conf.Durability(min_replicas=1, timeout_ms=100)
    s = conf.parse({"DURABILITY": {"MIN_REPLICAS": 16, "TIMEOUT_MS": 60_000}}, debug=False)
    assert (s.durability.min_replicas, s.durability.timeout_ms) == (16, 60_000)


@pytest.mark.parametrize("value", [17, -1, True, 1.0, "1"])
def test_min_replicas_says_its_limit(value: Any) -> None:
    problem = only({"DURABILITY": {"MIN_REPLICAS": value}})
    assert problem.startswith("XSM['DURABILITY']['MIN_REPLICAS']: expected an int from 0 to 16")
    assert "at most 16 replicas" in problem


def test_a_zero_timeout_would_wait_forever() -> None:
    problem = only({"DURABILITY": {"MIN_REPLICAS": 1, "TIMEOUT_MS": 0}})
    assert problem.startswith("XSM['DURABILITY']['TIMEOUT_MS']: 0 would make every commit wait")
    assert "give 1 to 60000 ms, e.g. 100" in problem


@pytest.mark.parametrize("value", [60_001, -5, False, 0.5, None])
def test_timeout_ms_range(value: Any) -> None:
    assert "['TIMEOUT_MS']: expected an int from 1 to 60000" in only(
        {"DURABILITY": {"TIMEOUT_MS": value}}
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", "XSM['DURABILITY']: expected a dict, got str"),
        ({"MIN_REPLICA": 1}, "Unknown setting XSM['DURABILITY']['MIN_REPLICA'] (did you mean"),
    ],
)
def test_durability_shape(value: Any, expected: str) -> None:
    assert expected in only({"DURABILITY": value})


# --- DURABILITY TIMEOUT_MS against the socket timeout of the commits' connection ------------

#: Waits for a replica: DURABILITY['TIMEOUT_MS'] then matters.
WAITS = {"MIN_REPLICAS": 1}


def cache(location: str = "redis://10.0.0.5:6379/0", **options: Any) -> dict[str, Any]:
    return {
        "xsm": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": location,
            "OPTIONS": options,
        }
    }


@pytest.mark.parametrize(
    ("value", "caches", "seconds", "where"),
    [
        ({"REDIS_URL": "redis://10.0.0.5/0"}, None, 5, "XSM['SOCKET_TIMEOUT_S']"),
        (
            {"REDIS_URL": "redis://10.0.0.5/0", "REDIS_CLUSTER": True, "SOCKET_TIMEOUT_S": 2},
            None,
            2,
            "XSM['SOCKET_TIMEOUT_S']",
        ),
        (
            {"REDIS_URL": "redis://10.0.0.5/0", "REDIS_OPTIONS": {"socket_timeout": 1.5}},
            None,
            1.5,
            "XSM['REDIS_OPTIONS']['socket_timeout']",
        ),
        (  # redis-py: the URL's query wins over keyword arguments
            {
                "REDIS_URL": "rediss://u:hunter2@10.0.0.5/0?socket_timeout=1&ssl_cert_reqs=none",
                "REDIS_OPTIONS": {"socket_timeout": 30},
            },
            None,
            1,
            "the socket_timeout in the query of XSM['REDIS_URL']",
        ),
        ({"SENTINEL": SENTINEL, "SOCKET_TIMEOUT_S": 1}, None, 1, "XSM['SOCKET_TIMEOUT_S']"),
        (
            {"SENTINEL": {**SENTINEL, "OPTIONS": {"socket_timeout": 0.5}}, "SOCKET_TIMEOUT_S": 30},
            None,
            0.5,
            "XSM['SENTINEL']['OPTIONS']['socket_timeout']",
        ),
        (
            {"CACHE_ALIAS": "xsm", "SOCKET_TIMEOUT_S": 30},
            cache(SOCKET_TIMEOUT=1),
            1,
            "CACHES['xsm']['OPTIONS']['SOCKET_TIMEOUT']",
        ),
        (
            {"CACHE_ALIAS": "xsm"},
            cache(SOCKET_TIMEOUT=30, CONNECTION_POOL_KWARGS={"socket_timeout": 1}),
            1,
            "CACHES['xsm']['OPTIONS']['CONNECTION_POOL_KWARGS']['socket_timeout']",
        ),
        (
            {"CACHE_ALIAS": "xsm"},
            cache("redis://a:6379/0?socket_timeout=1,redis://b:6379/0", SOCKET_TIMEOUT=30),
            1,
            "the socket_timeout in the query of CACHES['xsm']['LOCATION']",
        ),
    ],
)
def test_a_wait_longer_than_half_the_socket_timeout_is_refused(
    value: dict[str, Any], caches: Any, seconds: float, where: str
) -> None:
    """A WAIT that outlasts the socket timeout turns "not durable" into
    "unavailable" after the socket timeout: refused, naming both values,
    where the timeout comes from, and both fixes."""
    wait_ms = int(seconds * 500) + 1
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse(
            {**value, "DURABILITY": {**WAITS, "TIMEOUT_MS": wait_ms}}, debug=False, caches=caches
        )
    [problem] = info.value.problems
    assert problem.startswith(
        f"XSM['DURABILITY']['TIMEOUT_MS']: {wait_ms} ms is more than half the socket timeout "
        f"of the connection commits run on ({seconds:g} s, from {where})"
    )
    assert "would fail as unavailable instead of not durable" in problem
    assert problem.endswith(
        f"(lower TIMEOUT_MS to at most {wait_ms - 1} ms, or raise {where} to at least "
        f"{wait_ms * 2 / 1000:g} s)"
    )
    assert "hunter2" not in problem and "10.0.0.5" not in problem
    # half the socket timeout is accepted, and so is any TIMEOUT_MS that nothing waits for
    for durability in ({**WAITS, "TIMEOUT_MS": wait_ms - 1}, {"TIMEOUT_MS": 60_000}):
        conf.parse({**value, "DURABILITY": durability}, debug=False, caches=caches)


@pytest.mark.parametrize(
    ("value", "caches"),
    [
        ({"REDIS_URL": "redis://10.0.0.5/0", "REDIS_OPTIONS": {"socket_timeout": None}}, None),
        ({"SENTINEL": {**SENTINEL, "OPTIONS": {"socket_timeout": None}}}, None),
        ({"CACHE_ALIAS": "xsm"}, cache()),  # django-redis: no timeout (xsm.W005 says so)
        ({"CACHE_ALIAS": "xsm"}, None),  # CACHES not given to parse(): not known
        ({"CACHE_ALIAS": "other"}, cache(SOCKET_TIMEOUT=0.1)),  # no such cache: xsm.E005
        # a value redis-py refuses when it builds the client (reported there)
        ({"REDIS_URL": "redis://10.0.0.5/0?socket_timeout=soon"}, None),
        ({"REDIS_URL": "redis://10.0.0.5/0", "REDIS_OPTIONS": {"socket_timeout": "1"}}, None),
        ({"EMBEDDED": True}, None),  # no socket at all
    ],
)
def test_no_known_socket_timeout_leaves_timeout_ms_alone(
    value: dict[str, Any], caches: Any
) -> None:
    durability = {"MIN_REPLICAS": 0 if value.get("EMBEDDED") else 1, "TIMEOUT_MS": 60_000}
    s = conf.parse({**value, "DURABILITY": durability}, debug=False, caches=caches)
    assert s.durability.timeout_ms == 60_000


def test_the_wait_check_reads_caches_and_stops_the_backend(xsm: Any, settings: Any) -> None:
    """Through Django: the cache alias's timeout comes from CACHES; the
    problem is one more xsm.E001 and the backend refuses to build."""
    settings.CACHES = {**settings.CACHES, **cache(SOCKET_TIMEOUT=1, SOCKET_CONNECT_TIMEOUT=1)}
    xsm(CACHE_ALIAS="xsm", EMBEDDED=None, DURABILITY={**WAITS, "TIMEOUT_MS": 800})
    [error] = [m for m in check_settings() if m.id == "xsm.E001"]
    assert error.msg.startswith("XSM['DURABILITY']['TIMEOUT_MS']: 800 ms is more than half")
    assert "CACHES['xsm']['OPTIONS']['SOCKET_TIMEOUT']" in error.msg
    with pytest.raises(ImproperlyConfigured, match="TIMEOUT_MS"):
        stores.get_backend()
    settings.CACHES = {**settings.CACHES, **cache(SOCKET_TIMEOUT=2, SOCKET_CONNECT_TIMEOUT=2)}
    assert [m for m in check_settings() if m.id == "xsm.E001"] == []


# --- cached, reset, reported by check ------------------------------------------------------


def test_the_settings_are_cached_and_rebuilt_on_change(xsm: Any) -> None:
    xsm(SENTINEL=SENTINEL, EMBEDDED=None, DURABILITY={"MIN_REPLICAS": 1})
    first = conf.get_settings()
    assert conf.get_settings() is first and first.durability.min_replicas == 1
    xsm(SENTINEL=None, REDIS_URL="redis://127.0.0.1:1/0", REDIS_CLUSTER=True, DURABILITY={})
    again = conf.get_settings()
    assert again is not first
    assert again.sentinel is None and again.redis_cluster is True
    assert again.durability.min_replicas == 0  # back to the default


def test_check_reports_them_as_e001(xsm: Any) -> None:
    xsm(REDIS_CLUSTER="yes", DURABILITY={"TIMEOUT_MS": 0}, SENTINEL={"HOSTS": []})
    messages = [m for m in check_settings() if m.id == "xsm.E001"]
    text = "\n".join(m.msg for m in messages)
    assert len(messages) == 4, text  # REDIS_CLUSTER, TIMEOUT_MS, HOSTS, SERVICE


# --- connection problems (readiness) -------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ({"REDIS_URL": "redis://h/0", "SENTINEL": SENTINEL}, "both REDIS_URL and SENTINEL"),
        ({"CACHE_ALIAS": "default", "SENTINEL": SENTINEL}, "both CACHE_ALIAS and SENTINEL"),
        (
            {"REDIS_URL": "redis://h/0", "CACHE_ALIAS": "default", "SENTINEL": SENTINEL},
            "REDIS_URL, CACHE_ALIAS and SENTINEL",
        ),
    ],
)
def test_e003_sentinel_is_exclusive(xsm: Any, sources: dict[str, Any], message: str) -> None:
    xsm(EMBEDDED=None, **sources)
    [error] = [m for m in check_settings() if m.id == "xsm.E003"]
    assert error.msg == f"XSM sets {message}"
    assert "SENTINEL for a Sentinel-managed primary" in (error.hint or "")
    with pytest.raises(ImproperlyConfigured, match="XSM sets"):
        stores.get_backend()


@pytest.mark.parametrize(
    "url", ["unix:///run/redis.sock", "redis://h:7000/1", "redis://h:7000?db=2"]
)
def test_e004_a_cluster_url_is_tcp_on_database_0(xsm: Any, url: str) -> None:
    xsm(REDIS_URL=url, REDIS_CLUSTER=True, EMBEDDED=None)
    [problem] = connection_problems(conf.get_settings())
    assert problem.id == "xsm.E004" and "cannot seed a Redis Cluster client" in problem.message
    assert ids(check_settings()) == ["xsm.E004"]


@pytest.mark.parametrize("url", ["redis://h:7000/0", "rediss://u:pw@h:7000", "redis://h:7000"])
def test_cluster_urls_that_pass(xsm: Any, url: str) -> None:
    xsm(REDIS_URL=url, REDIS_CLUSTER=True, EMBEDDED=None)
    assert check_settings() == []


def test_sentinel_is_a_server_not_the_embedded_store(xsm: Any, settings: Any) -> None:
    settings.DEBUG = False
    xsm(SENTINEL=SENTINEL, EMBEDDED=None)
    assert check_settings() == []  # no xsm.E008: Redis is configured
    xsm(SENTINEL=None, EMBEDDED=False)
    [error] = [m for m in check_settings() if m.id == "xsm.E008"]
    assert "or SENTINEL" in (error.hint or "")


# --- clients and descriptions (built, never connected) --------------------------------------


def test_a_sentinel_backend_and_its_connection_options(xsm: Any) -> None:
    xsm(
        EMBEDDED=None,
        SOCKET_TIMEOUT_S=0.5,
        SENTINEL={
            **SENTINEL,
            "DB": 3,
            "OPTIONS": {"password": "hunter2", "username": "app", "socket_timeout": 0.75},
            "SENTINEL_OPTIONS": {"password": "sentinel-pw"},
        },
        DURABILITY={"MIN_REPLICAS": 1, "TIMEOUT_MS": 250},
    )
    found = stores.get_backend()
    assert found.source == "sentinel"
    assert found.description == "sentinel 'mymaster' (XSM['SENTINEL'])"
    pool = found.client.connection_pool
    assert isinstance(pool, redis.sentinel.SentinelConnectionPool)
    assert pool.service_name == "mymaster"
    kwargs = pool.connection_kwargs
    assert (kwargs["db"], kwargs["password"], kwargs["username"]) == (3, "hunter2", "app")
    assert kwargs["socket_timeout"] == 0.75  # OPTIONS win
    assert kwargs["socket_connect_timeout"] == 0.5  # SOCKET_TIMEOUT_S otherwise
    legs = [c.connection_pool.connection_kwargs for c in pool.sentinel_manager.sentinels]
    assert [(k["host"], k["port"]) for k in legs] == [("127.0.0.1", 1), ("127.0.0.1", 2)]
    assert all(k["password"] == "sentinel-pw" and k["socket_timeout"] == 0.5 for k in legs)
    assert (found.store.min_replicas, found.store.replica_timeout_ms) == (1, 250)
    assert found.inbox.core.durability.min_replicas == 1
    assert "hunter2" not in found.description
    # nothing answers on ports 1 and 2: the store says so, within the timeouts
    assert found.store.health()["ok"] is False


def test_sentinel_tls_on_the_primary_leg(xsm: Any) -> None:
    xsm(EMBEDDED=None, SENTINEL={**SENTINEL, "OPTIONS": {"ssl": True}})
    pool = stores.get_backend().client.connection_pool
    assert issubclass(pool.connection_class, redis.sentinel.SentinelManagedSSLConnection)


def test_the_async_sentinel_backend(xsm: Any) -> None:
    xsm(EMBEDDED=None, SENTINEL={**SENTINEL, "OPTIONS": {"password": "hunter2"}})
    found = async_backend()
    assert found.description == "sentinel 'mymaster' (XSM['SENTINEL'])"
    pool = found.client.connection_pool
    assert isinstance(pool, redis.asyncio.sentinel.SentinelConnectionPool)
    assert pool.connection_kwargs["password"] == "hunter2"
    assert len(pool.sentinel_manager.sentinels) == 2


@pytest.mark.parametrize(
    ("name", "option"), [("OPTIONS", "sockettimeout"), ("SENTINEL_OPTIONS", "no_such_option")]
)
def test_a_misspelt_sentinel_option_fails_at_build_time(xsm: Any, name: str, option: str) -> None:
    xsm(EMBEDDED=None, SENTINEL={**SENTINEL, name: {option: 1, "password": "hunter2"}})
    with pytest.raises(ImproperlyConfigured) as info:
        stores.get_backend()
    assert f"XSM['SENTINEL'][{name!r}] is invalid (TypeError" in str(info.value)
    assert "hunter2" not in str(info.value)


# --- unreachable sentinels: discovery bounded by their timeouts -----------------------------

#: The sentinels' (and the primary's) socket and connect timeout in these tests.
SENTINEL_TIMEOUT_S = 0.3


@contextmanager
def unreachable_sentinels(kind: str, count: int = 3) -> Iterator[list[tuple[str, int]]]:
    """``count`` loopback ports where sentinels should be. ``"silent"`` ones
    accept every connection and never answer (a hung sentinel, a proxy
    whose backend is gone); ``"refusing"`` ones are bound without
    listening, so every connection is refused."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    held: list[socket.socket] = []
    stop = threading.Event()
    threads = []

    def hold(listener: socket.socket) -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # kept open, never read nor written
            except TimeoutError:
                continue

    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
            if kind == "silent":
                sock.listen(16)
                threads.append(threading.Thread(target=hold, args=(sock,), daemon=True))
                threads[-1].start()
        yield [("127.0.0.1", sock.getsockname()[1]) for sock in sockets]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for sock in [*held, *sockets]:
            sock.close()


def discovery_bound(hosts: list[tuple[str, int]]) -> float:
    """What docs/redis.md promises (the connect and the socket timeout of
    each sentinel, asked once in turn), plus 1 s for a busy machine."""
    return len(hosts) * 2 * SENTINEL_TIMEOUT_S + 1.0


def on_sentinels(xsm: Any, hosts: list[tuple[str, int]]) -> None:
    xsm(
        EMBEDDED=None,
        SOCKET_TIMEOUT_S=SENTINEL_TIMEOUT_S,
        SENTINEL={"HOSTS": hosts, "SERVICE": "mymaster"},
    )


def assert_unavailable(error: StoreUnavailableError) -> None:
    assert error.cause == "MasterNotFoundError"
    assert "127.0.0.1" not in str(error)  # redis-py's text names every sentinel: not shown


@pytest.mark.parametrize("kind", ["silent", "refusing"])
def test_unreachable_sentinels_fail_within_their_timeouts(xsm: Any, kind: str) -> None:
    """redis-py 8 retries a sentinel's client 10 times: three silent
    sentinels held one call for ~10 s here (~45 s with 1 s timeouts)."""
    with unreachable_sentinels(kind) as hosts:
        on_sentinels(xsm, hosts)
        found = stores.get_backend()
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as info:
                found.store.load("order:1")
            elapsed = time.monotonic() - started
        finally:
            found.client.close()
            close_sentinels(found.client.connection_pool.sentinel_manager)
    assert elapsed <= discovery_bound(hosts)
    assert_unavailable(info.value)


@pytest.mark.parametrize("kind", ["silent", "refusing"])
def test_unreachable_sentinels_fail_within_their_timeouts_async(xsm: Any, kind: str) -> None:
    async def load() -> tuple[float, StoreUnavailableError]:
        store = stores.get_async_backend().store
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as info:
            await store.load("order:1")
        return time.monotonic() - started, info.value

    with unreachable_sentinels(kind) as hosts:
        on_sentinels(xsm, hosts)
        elapsed, error = asyncio.run(load())  # the loop's end closes the client
    assert elapsed <= discovery_bound(hosts)
    assert_unavailable(error)


def test_retries_set_for_the_sentinels_are_kept() -> None:
    """Only the hidden default is replaced: a retry policy the settings
    give the sentinels' clients is theirs to keep."""
    import redis.asyncio.retry
    import redis.retry

    own_choices = [
        {"retry": None},  # redis-py's connection default: no retries
        {"retry_on_timeout": True},
        {"retry_on_error": [redis.exceptions.TimeoutError]},
    ]
    for is_async, kind in ((False, redis.retry.Retry), (True, redis.asyncio.retry.Retry)):
        for given in ({"socket_timeout": 1}, {"retry_on_timeout": False, "retry_on_error": []}):
            legs = twins.ask_each_sentinel_once(given, is_async=is_async)
            assert isinstance(legs["retry"], kind) and legs["retry"]._retries == 0
            assert legs.items() >= given.items()
        for own in own_choices:
            assert twins.ask_each_sentinel_once(own, is_async=is_async) == own


def test_the_async_cluster_backend_is_built_without_io(xsm: Any) -> None:
    xsm(REDIS_URL="redis://127.0.0.1:1/0", REDIS_CLUSTER=True, EMBEDDED=None, SOCKET_TIMEOUT_S=0.3)
    found = async_backend()
    assert isinstance(found.client, redis.asyncio.cluster.RedisCluster)
    assert found.description == "redis cluster (XSM['REDIS_URL'])"
    assert found.client.connection_kwargs["socket_timeout"] == 0.3


def test_an_unreachable_cluster_is_unavailable_not_a_crash(xsm: Any) -> None:
    # the blocking cluster client reads the slot map when it is built
    xsm(REDIS_URL="redis://:hunter2@127.0.0.1:1/0", REDIS_CLUSTER=True, EMBEDDED=None)
    with pytest.raises(StoreUnavailableError) as info:
        stores.get_backend()
    assert "Redis Cluster could not be reached at start-up" in str(info.value)
    assert "127.0.0.1" not in str(info.value) and "hunter2" not in str(info.value)
    assert stores.build._backend is None  # not cached: the next call tries again
    response = Client().get("/_xsm/ready")
    assert response.status_code == 503 and response.json()["reason"] == "store"


def test_the_embedded_and_url_descriptions_are_unchanged(xsm: Any) -> None:
    assert stores.get_backend().description == "embedded fakeredis (in-process)"
    xsm(REDIS_URL="redis://:hunter2@127.0.0.1:1/0", EMBEDDED=None)
    found = stores.get_backend()
    assert (found.source, found.description) == ("url", "redis (XSM['REDIS_URL'])")
    assert not clients.is_cluster(found.client) and clients.sentinel_service(found.client) is None


# --- django-redis's SentinelClient and its asyncio twin -------------------------------------


@pytest.fixture
def sentinel_cache(settings: Any, xsm: Any) -> Any:
    from django_redis.pool import ConnectionFactory

    settings.CACHES = {
        **settings.CACHES,
        "xsm": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://mymaster/3",
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.SentinelClient",
                "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
                "SENTINELS": [("127.0.0.1", 1), ("127.0.0.1", 2)],
                "SENTINEL_KWARGS": {"password": "sentinel-pw", "socket_timeout": 0.5},
                "PASSWORD": "hunter2",
                "SOCKET_TIMEOUT": 0.5,
                "SOCKET_CONNECT_TIMEOUT": 0.5,
            },
        },
    }
    xsm(CACHE_ALIAS="xsm", EMBEDDED=None)
    yield
    ConnectionFactory._pools.clear()


def test_a_django_redis_sentinel_alias_is_described_by_its_service(sentinel_cache: Any) -> None:
    found = stores.get_backend()
    assert (found.source, found.description) == ("cache", "sentinel 'mymaster' (cache 'xsm')")


def test_the_async_twin_of_a_django_redis_sentinel_client(sentinel_cache: Any) -> None:
    sync = stores.get_backend().client
    twin = clients.async_twin(sync)
    pool = twin.connection_pool
    assert isinstance(pool, redis.asyncio.sentinel.SentinelConnectionPool)
    assert pool.service_name == "mymaster"
    kwargs = pool.connection_kwargs
    # the service name django-redis read as the URL's host is not an address
    assert "host" not in kwargs and "port" not in kwargs
    assert (kwargs["db"], kwargs["password"], kwargs["socket_timeout"]) == (3, "hunter2", 0.5)
    assert "parser_class" not in kwargs  # a sync-only option is not copied
    legs = [c.connection_pool.connection_kwargs for c in pool.sentinel_manager.sentinels]
    assert [(k["host"], k["port"]) for k in legs] == [("127.0.0.1", 1), ("127.0.0.1", 2)]
    assert all(k["password"] == "sentinel-pw" for k in legs)
    assert async_backend().description == "sentinel 'mymaster' (cache 'xsm')"


def test_the_async_twin_asks_each_unreachable_sentinel_once(settings: Any, xsm: Any) -> None:
    """A django-redis Sentinel cache configured as docs/django.md shows
    (``retry`` in ``SENTINEL_KWARGS``): its blocking client asks each
    sentinel once, and so does the asyncio twin django-xsm builds, although
    the cache's retry object is sync-only and not copied."""
    from django_redis.pool import ConnectionFactory
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    async def load() -> tuple[float, StoreUnavailableError]:
        store = stores.get_async_backend().store
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as info:
            await store.load("order:1")
        return time.monotonic() - started, info.value

    legs = {
        "socket_timeout": SENTINEL_TIMEOUT_S,
        "socket_connect_timeout": SENTINEL_TIMEOUT_S,
        "retry": Retry(NoBackoff(), 0),
    }
    with unreachable_sentinels("silent") as hosts:
        settings.CACHES = {
            **settings.CACHES,
            "xsm": {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": "redis://mymaster/3",
                "OPTIONS": {
                    "CLIENT_CLASS": "django_redis.client.SentinelClient",
                    "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
                    "SENTINELS": hosts,
                    "SENTINEL_KWARGS": legs,
                    "SOCKET_TIMEOUT": SENTINEL_TIMEOUT_S,
                    "SOCKET_CONNECT_TIMEOUT": SENTINEL_TIMEOUT_S,
                },
            },
        }
        xsm(CACHE_ALIAS="xsm", EMBEDDED=None)
        try:
            async_elapsed, async_error = asyncio.run(load())
            store = stores.get_backend().store
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as info:
                store.load("order:1")
            elapsed = time.monotonic() - started
        finally:
            built = stores.build._backend
            if built is not None:  # the cache's client: its sentinels' sockets
                close_sentinels(built.client.connection_pool.sentinel_manager)
            ConnectionFactory._pools.clear()
    for took, error in ((async_elapsed, async_error), (elapsed, info.value)):
        assert took <= discovery_bound(hosts)
        assert_unavailable(error)


def test_the_cluster_factory_reads_django_redis_options() -> None:
    factory = clients.ClusterConnectionFactory(
        {
            "PASSWORD": "pw",
            "USERNAME": "app",
            "SOCKET_TIMEOUT": 2,
            "SOCKET_CONNECT_TIMEOUT": 1,
            "REDIS_CLIENT_KWARGS": {"require_full_coverage": False},
        }
    )
    assert factory.make_connection_params("redis://10.0.0.5:7000/0") == {
        "url": "redis://10.0.0.5:7000/0",
        "username": "app",
        "password": "pw",
        "socket_timeout": 2,
        "socket_connect_timeout": 1,
        "require_full_coverage": False,
    }


def test_cache_alias_problem_still_refuses_sharded_clients(xsm: Any, settings: Any) -> None:
    settings.CACHES = {
        **settings.CACHES,
        "shards": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": ["redis://a:6379/0", "redis://b:6379/0"],
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.ShardClient"},
        },
    }
    xsm(CACHE_ALIAS="shards", EMBEDDED=None)
    [problem] = connection_problems(conf.get_settings())
    assert problem.id == "xsm.E006" and "sharded" in problem.message


# --- the deploy checks and xsm_namespace off a cluster ---------------------------------------


@pytest.mark.parametrize(
    ("hosts", "options", "warned"),
    [
        ([("sentinel.internal", 26379)], {}, True),
        ([("sentinel.internal", 26379)], {"OPTIONS": {"ssl": True}}, True),
        (
            [("sentinel.internal", 26379)],
            {"OPTIONS": {"ssl": True}, "SENTINEL_OPTIONS": {"ssl": True}},
            False,
        ),
        ([("127.0.0.1", 26379), ("localhost", 26380)], {}, False),
    ],
)
def test_w010_plaintext_to_remote_sentinels(
    xsm: Any, monkeypatch: pytest.MonkeyPatch, hosts: Any, options: Any, warned: bool
) -> None:
    monkeypatch.setattr(checks, "_persistence", list)  # these hosts are not ours to ask
    xsm(EMBEDDED=None, SENTINEL={"HOSTS": hosts, "SERVICE": "m", **options})
    assert ids(check_deploy()) == (["xsm.W010"] if warned else [])


def test_a_server_without_a_cluster_section_is_no_cluster_node(backend: Any) -> None:
    assert cluster_node_problem(conf.get_settings(), backend.client) is None


def test_namespace_info_reads_the_marker_without_creating_it(backend: Any) -> None:
    prefix = backend.store.prefix
    info = namespace_info(backend.client, prefix, None)
    assert (info.exists, info.buckets, info.layout, info.cluster) == (False, 16, None, False)
    assert namespace_info(backend.client, prefix, 32).buckets == 32  # what it would be made with
    assert namespace_info(backend.client, prefix, None).exists is False
    backend.store.health()  # the first use creates it
    info = namespace_info(backend.client, prefix, None)
    assert (info.exists, info.buckets, info.layout) == (True, 16, LAYOUT_VERSION)
    assert info.namespace_id and bucket_problem(info) is None


@pytest.mark.parametrize(
    ("buckets", "exists", "warned"), [(16, True, True), (23, False, True), (24, True, False)]
)
def test_w013_wants_eight_buckets_per_master(buckets: int, exists: bool, warned: bool) -> None:
    masters = ("10.0.0.5:7000", "10.0.0.6:7000", "10.0.0.7:7000")
    info = NamespaceInfo(
        "shop", exists, buckets, 1, "id", masters, dict(zip(masters, (6, 5, 5), strict=True))
    )
    problem = bucket_problem(info)
    if not warned:
        assert problem is None
        return
    assert problem is not None and problem.id == "xsm.W013"
    what = "has" if exists else "will be created with"
    assert f"Namespace 'shop' {what} {buckets} buckets for 3 cluster masters" in problem.message
    assert "they hold 6, 5, 5" in problem.message
    if exists:
        assert "--create --buckets 24` under a new XSM['PREFIX']" in problem.hint
    else:
        assert "set XSM['BUCKETS'] = 24 before the namespace is created" in problem.hint


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("xsm_namespace", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_xsm_namespace_shows_then_creates(backend: Any) -> None:
    prefix = backend.store.prefix
    out, _ = run()
    assert f"namespace     {prefix}" in out
    assert "not created yet (the first use creates it with 16 buckets)" in out
    assert "masters" not in out  # not a cluster
    out, _ = run("--create", "--buckets", "32")
    assert "status      exists" in out and "buckets     32" in out
    assert f"Created namespace {prefix!r} with 32 buckets" in out
    data = json.loads(run("--json")[0])
    assert (data["prefix"], data["exists"], data["buckets"]) == (prefix, True, 32)
    assert data["layout"] == LAYOUT_VERSION
    assert data["cluster"] is False and data["masters"] == [] and data["warning"] is None
    assert data["namespace_id"] and data["store"] == backend.description
    out, _ = run("--create", "--buckets", "32")  # the same count again: nothing to do
    assert "Created" not in out
    with pytest.raises(CommandError, match="already exists with 32 buckets, not 16") as info:
        run("--create", "--buckets", "16")
    assert "set a new XSM['PREFIX']" in str(info.value)


def test_xsm_namespace_upgrades_a_layout_1_namespace_once(backend: Any) -> None:
    prefix = backend.store.prefix
    out, _ = run("--upgrade-layout")  # nothing to upgrade yet: nothing created
    assert "Upgraded" not in out and "not created yet" in out
    run("--create")
    schema = "{" + prefix + "}:schema"
    backend.client.hset(schema, "layout", 1)
    with pytest.raises(StoreError, match="--upgrade-layout"):
        type(backend.store)(backend.client, prefix=prefix).load("order:1")
    out, _ = run("--upgrade-layout")
    assert f"Upgraded namespace {prefix!r} from key layout 1 to {LAYOUT_VERSION}" in out
    assert f"layout      {LAYOUT_VERSION}" in out
    out, _ = run("--upgrade-layout")
    assert "Upgraded" not in out
    assert type(backend.store)(backend.client, prefix=prefix).load("order:1") is None


def test_xsm_namespace_create_uses_the_configured_count(backend: Any, xsm: Any) -> None:
    xsm(BUCKETS=8, PREFIX=backend.store.prefix)
    with pytest.raises(CommandError, match=r"XSM\['BUCKETS'\] is 8 but --buckets is 16"):
        run("--create", "--buckets", "16")
    out, _ = run("--create")
    assert "with 8 buckets" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--buckets", "8"], "--buckets goes with --create"),
        (["--create", "--buckets", "5000"], "buckets must be an int from 1 to 1024"),
    ],
)
def test_xsm_namespace_refusals(backend: Any, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run(*args)


# --- a cluster client for a server without cluster mode (the live server) ----------------


def _db0(url: str) -> str:
    """The live server's URL on database 0 (a cluster client knows no other);
    CLUSTER SLOTS is all it sends there."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/0", "", ""))


@pytest.mark.live
def test_e012_redis_cluster_on_a_server_without_cluster_mode(xsm: Any, live_url: str) -> None:
    xsm(REDIS_URL=_db0(live_url), REDIS_CLUSTER=True, EMBEDDED=None)
    with pytest.raises(clients.NotAClusterNode, match="This Redis is not a cluster node"):
        stores.get_backend()
    [error] = [m for m in check_deploy() if m.id == "xsm.E012"]
    assert "drop XSM['REDIS_CLUSTER']" in error.msg
    response = Client().get("/_xsm/ready")
    assert response.status_code == 503 and response.json()["reason"] == "configuration"


@pytest.mark.live
def test_e012_a_cluster_cache_on_a_server_without_cluster_mode(
    xsm: Any, settings: Any, live_url: str
) -> None:
    settings.CACHES = {
        **settings.CACHES,
        "xsm": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": _db0(live_url),
            "OPTIONS": {
                "CONNECTION_FACTORY": "django_xsm.backend.clients.ClusterConnectionFactory",
                "SOCKET_TIMEOUT": 2,
                "SOCKET_CONNECT_TIMEOUT": 2,
            },
        },
    }
    xsm(CACHE_ALIAS="xsm", EMBEDDED=None)
    [error] = [m for m in check_deploy() if m.id == "xsm.E012"]
    assert "cache 'xsm' has a cluster client (ClusterConnectionFactory)" in error.msg


def test_min_replicas_is_refused_on_the_embedded_store(xsm: Any) -> None:
    xsm(DURABILITY={"MIN_REPLICAS": 1})  # the test settings force EMBEDDED
    [error] = [m for m in check_settings() if m.id == "xsm.E001"]
    assert error.msg.startswith("XSM['DURABILITY']['MIN_REPLICAS']: is 1 but the store is the")
    with pytest.raises(ImproperlyConfigured, match="has no replicas"):
        stores.get_backend()
    xsm(DURABILITY={"MIN_REPLICAS": 1}, SENTINEL=SENTINEL, EMBEDDED=None)
    assert conf.get_settings().durability.min_replicas == 1


class _Closes:
    """Records its own aclose() in a shared log."""

    def __init__(self, log: list[str], name: str, **attrs: Any) -> None:
        self.log, self.name = log, name
        self.__dict__.update(attrs)

    async def aclose(self) -> None:
        self.log.append(self.name)


def test_aclose_closes_the_sentinels_whether_or_not_sentinel_has_aclose() -> None:
    """redis-py 8's asyncio ``Sentinel`` has ``aclose()``; 5.0.1 to 7.x have
    none (it raised AttributeError at the loop's end and leaked the sentinel
    connections): there each sentinel's client is closed."""
    log: list[str] = []
    old = type("OldSentinel", (), {"sentinels": [_Closes(log, "s1"), _Closes(log, "s2")]})()
    new = _Closes(log, "Sentinel.aclose", sentinels=[_Closes(log, "unused")])
    cases = [(old, ["primary", "s1", "s2"]), (new, ["primary", "Sentinel.aclose"])]
    for manager, expected in cases:
        log.clear()
        pool = type("Pool", (), {"sentinel_manager": manager})()
        asyncio.run(clients.aclose(_Closes(log, "primary", connection_pool=pool)))
        assert log == expected


def test_aclose_sentinels_works_on_the_installed_redis_py() -> None:
    """The real asyncio ``Sentinel`` of whatever redis-py is installed (the
    redis-py5 CI leg runs 5.0.1): its sentinels' clients end up closed."""
    manager = redis.asyncio.sentinel.Sentinel([("127.0.0.1", 1), ("127.0.0.1", 2)])

    async def run() -> None:
        await clients.aclose_sentinels(manager)

    asyncio.run(run())
    for sentinel in manager.sentinels:
        pool = sentinel.connection_pool
        assert not pool._in_use_connections and not pool._available_connections
