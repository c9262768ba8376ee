"""django_xsm.backend: the backend built from settings."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
import redis
import redis.asyncio
from django.core.exceptions import ImproperlyConfigured

from django_xsm import backend as stores
from django_xsm.backend import clients
from django_xsm.backend.transitions import TransitionPlugin
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError, StoreUnavailableError
from django_xsm.persistence import (
    AdaptiveLock,
    AuditPlugin,
    IdempotencyPlugin,
    JsonCodec,
    OptimisticLock,
    PessimisticLock,
)
from django_xsm.registry import machines
from tests.support import delete_namespace


def test_embedded_backend_shares_one_client_and_prefix(xsm: Any):
    xsm(PREFIX="shop")
    backend = stores.get_backend()
    assert backend.source == "embedded"
    assert backend.store.client is backend.inbox.client is backend.log.client is backend.client
    assert backend.store.prefix == backend.inbox.prefix == backend.log.prefix == "shop"
    # one-script commits: open claims and the commit include inbox and log
    assert backend.store.shares_commit(backend.inbox)
    assert backend.store.shares_commit(backend.log)
    assert stores.get_backend() is backend
    assert stores.get_store() is backend.store
    assert stores.get_inbox() is backend.inbox
    assert stores.get_log() is backend.log
    # the store is the whole backend: its parts are the backend's
    assert backend.inbox is backend.store.inbox and backend.log is backend.store.log
    assert stores.get_outbox() is backend.store.outbox
    xsm(PREFIX="shop-2")  # new settings: a new store, and its own parts
    assert stores.get_outbox() is stores.get_backend().store.outbox is not backend.store.outbox


def test_keys_live_under_the_prefix(xsm: Any):
    xsm(PREFIX="shop-a")
    machines["ticket"].objects.send("ticket:1", "BUMP", create=True)
    names = [k.decode() for k in stores.get_backend().client.keys("*")]
    assert names
    assert all(n.startswith(("{shop-a:", "{shop-a}")) for n in names), names


def test_plugins_follow_the_settings(xsm: Any):
    xsm(IDEMPOTENCY={"TTL_S": 60, "LEASE_S": 5}, AUDIT={"REDACT": ["iban"]})
    plugins = stores.get_backend().plugins
    kinds = [type(p) for p in plugins]
    assert kinds == [IdempotencyPlugin, AuditPlugin, TransitionPlugin]
    assert plugins[0].ttl_ms == 60_000
    assert plugins[0].lease_ms == 5_000
    xsm(AUDIT={"ENABLED": False})
    assert AuditPlugin not in [type(p) for p in stores.get_backend().plugins]


def test_store_options_follow_the_settings(xsm: Any):
    xsm(
        LOCK_TTL_MS=12_345,
        MAX_SNAPSHOT_BYTES=2048,
        INSTANCE_TTL_S=3600,
        AUDIT={"MAXLEN": 50},
        CODEC="django_xsm.persistence.JsonCodec",
    )
    backend = stores.get_backend()
    assert backend.store.lock_ttl_ms == 12_345
    assert backend.store.max_snapshot_bytes == 2048
    assert backend.store.ttl_s == 3600
    assert backend.log.maxlen == 50
    assert isinstance(backend.store.codec, JsonCodec)


def test_embedded_default_is_logged_once_per_process(
    xsm: Any, settings: Any, caplog: Any, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(clients, "_embedded_logged", False)
    with caplog.at_level(logging.WARNING, logger="django_xsm"):
        stores.get_backend()
        xsm(PREFIX="again")  # rebuilt, still embedded
        stores.get_backend()
    lines = [r for r in caplog.records if "in-process fakeredis" in r.getMessage()]
    assert len(lines) == 1


def test_embedded_refused_without_debug(settings: Any, xsm: Any):
    settings.DEBUG = False
    xsm(EMBEDDED=None)
    with pytest.raises(ImproperlyConfigured, match="no Redis configured"):
        stores.get_backend()
    settings.DEBUG = True
    assert stores.get_backend().source == "embedded"
    xsm(EMBEDDED=False)
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        stores.get_backend()


def test_missing_or_bad_prefix_is_refused(xsm: Any):
    xsm(PREFIX=None)
    with pytest.raises(ImproperlyConfigured, match="PREFIX"):
        stores.get_backend()
    xsm(PREFIX="has*glob")
    with pytest.raises(ImproperlyConfigured, match="PREFIX"):
        stores.get_backend()


def test_url_and_alias_together_are_refused(xsm: Any):
    xsm(REDIS_URL="redis://127.0.0.1:1/0", CACHE_ALIAS="default")
    with pytest.raises(ImproperlyConfigured, match="both"):
        stores.get_backend()


def test_redis_url_client_gets_the_socket_timeout_and_options(xsm: Any):
    xsm(
        REDIS_URL="redis://127.0.0.1:1/3",
        EMBEDDED=None,
        SOCKET_TIMEOUT_S=0.25,
        REDIS_OPTIONS={"client_name": "xsm-test"},
    )
    backend = stores.get_backend()  # nothing listens there: built anyway
    assert backend.source == "url"
    assert "127.0.0.1" not in backend.description
    kwargs = backend.client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == kwargs["socket_connect_timeout"] == 0.25
    assert kwargs["db"] == 3
    assert kwargs["client_name"] == "xsm-test"
    assert backend.store.health()["ok"] is False
    with pytest.raises(StoreUnavailableError):
        backend.store.load("ticket:1")


def test_rediss_url_builds_a_tls_client(xsm: Any):
    xsm(REDIS_URL="rediss://user:secret@127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.2)
    backend = stores.get_backend()
    assert backend.client.connection_pool.connection_class is redis.connection.SSLConnection

    async def build() -> Any:
        return stores.get_async_backend()

    async_backend = asyncio.run(build())
    pool = async_backend.client.connection_pool
    assert pool.connection_class is redis.asyncio.SSLConnection


def test_invalid_url_never_echoes_the_password(xsm: Any):
    xsm(REDIS_URL="redis://user:hunter2@host:notaport/0", EMBEDDED=None)
    with pytest.raises(ImproperlyConfigured) as info:
        stores.get_backend()
    assert "hunter2" not in str(info.value)


def test_unreachable_store_fails_within_the_socket_timeout(xsm: Any):
    # 192.0.2.0/24 is never routed (RFC 5737): only the connect timeout ends it.
    # The connection never leaves this machine's routing table check.
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.2)
    started = time.monotonic()
    assert stores.get_backend().store.health()["ok"] is False
    assert time.monotonic() - started < 5


# --- CACHE_ALIAS ------------------------------------------------------------------------


def _fake_cache(server: Any) -> dict[str, Any]:
    import fakeredis

    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://fake-cache:6379/0",
        "OPTIONS": {
            "CONNECTION_POOL_KWARGS": {
                "connection_class": fakeredis.FakeRedisConnection,
                "server": server,
            },
            "SOCKET_TIMEOUT": 2,
            "SOCKET_CONNECT_TIMEOUT": 2,
        },
    }


@pytest.fixture
def fake_cache(settings: Any, xsm: Any) -> Any:
    import fakeredis
    from django_redis.pool import ConnectionFactory

    server = fakeredis.FakeServer()
    settings.CACHES = {**settings.CACHES, "xsm": _fake_cache(server)}
    xsm(CACHE_ALIAS="xsm", EMBEDDED=None, PREFIX=f"c{uuid.uuid4().hex[:8]}")
    yield server
    ConnectionFactory._pools.clear()  # django-redis keeps pools per process


def test_cache_alias_reuses_the_django_redis_client(fake_cache: Any):
    from django_redis import get_redis_connection

    backend = stores.get_backend()
    assert backend.source == "cache"
    assert backend.description == "redis (cache 'xsm')"
    assert backend.client is get_redis_connection("xsm", write=True)
    machines["ticket"].objects.send("ticket:7", "BUMP", create=True)
    assert machines["ticket"].objects.get("ticket:7").context["count"] == 1


def test_cache_alias_async_twin_talks_to_the_same_server(fake_cache: Any):
    async def run() -> int:
        async with machines["ticket"].objects.aopen("ticket:8") as block:
            block.send("BUMP")
        backend = stores.get_async_backend()
        assert backend.source == "cache"
        return (await machines["ticket"].objects.aget("ticket:8")).version

    assert asyncio.run(run()) == 1
    assert machines["ticket"].objects.get("ticket:8").context["count"] == 1


def test_cache_alias_on_live_redis(settings: Any, xsm: Any, live_url: str):
    from django_redis.pool import ConnectionFactory

    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    settings.CACHES = {
        **settings.CACHES,
        "xsm": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": live_url,
            "OPTIONS": {"SOCKET_TIMEOUT": 2, "SOCKET_CONNECT_TIMEOUT": 2},
        },
    }
    xsm(CACHE_ALIAS="xsm", EMBEDDED=None, PREFIX=prefix)
    client = stores.get_backend().client
    try:
        machines["ticket"].objects.send("ticket:9", "BUMP", create=True)

        async def aread() -> int:
            return (await machines["ticket"].objects.aget("ticket:9")).context["count"]

        assert asyncio.run(aread()) == 1
    finally:
        delete_namespace(client, prefix)
        ConnectionFactory._pools.clear()


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        (None, "there is no cache 'missing'"),
        ({"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}, "not django-redis"),
        (
            {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": ["redis://a:6379/0", "redis://b:6379/0"],
                "OPTIONS": {"CLIENT_CLASS": "django_redis.client.ShardClient"},
            },
            "sharded",
        ),
    ],
)
def test_unusable_cache_alias_is_refused(
    settings: Any, xsm: Any, cache: dict[str, Any] | None, message: str
):
    alias = "missing" if cache is None else "bad"
    if cache is not None:
        settings.CACHES = {**settings.CACHES, "bad": cache}
    xsm(CACHE_ALIAS=alias, EMBEDDED=None)
    with pytest.raises(ImproperlyConfigured, match=message):
        stores.get_backend()


# --- async backends -----------------------------------------------------------------------


def test_one_async_backend_per_event_loop(xsm: Any):
    async def twice() -> tuple[Any, Any]:
        return stores.get_async_backend(), stores.get_async_backend()

    a, b = asyncio.run(twice())
    assert a is b
    assert a.inbox is a.store.inbox and a.log is a.store.log
    c, _ = asyncio.run(twice())
    assert c is not a
    assert a.store.prefix == c.store.prefix


def test_async_backend_sees_what_the_sync_one_wrote(backend: Any):
    machines["ticket"].objects.send("ticket:1", "BUMP", create=True)

    async def read() -> int:
        view = await machines["ticket"].objects.aget("ticket:1")
        return int(view.context["count"])

    assert asyncio.run(read()) == 1


def test_get_async_backend_needs_a_running_loop():
    with pytest.raises(RuntimeError):
        stores.get_async_backend()


# --- locks and scanner ---------------------------------------------------------------------


def test_lock_strategy(xsm: Any):
    adaptive = stores.lock_strategy()  # the default: optimistic until a conflict
    assert isinstance(adaptive, AdaptiveLock) and not adaptive.pessimistic
    assert isinstance(adaptive.for_attempt(0), OptimisticLock)
    queued = adaptive.for_attempt(1)
    assert isinstance(queued, PessimisticLock) and queued.timeout == 0.2  # LOCK_TIMEOUT_S
    xsm(LOCK_TIMEOUT_S=0.3)
    assert stores.lock_strategy("adaptive").for_attempt(2).timeout == 0.3
    xsm(LOCK="pessimistic", LOCK_TIMEOUT_S=0.7)
    lock = stores.lock_strategy()
    assert isinstance(lock, PessimisticLock)
    assert lock.timeout == 0.7
    assert isinstance(stores.lock_strategy("optimistic"), OptimisticLock)
    given = PessimisticLock(2.0)
    assert stores.lock_strategy(given) is given
    # a call's argument, not a setting: an XsmError naming it
    with pytest.raises(InvalidConfigError) as err:
        stores.lock_strategy("mutex")
    assert err.value.path == "lock" and "'mutex'" in str(err.value)
    with pytest.raises(ArgumentTypeError):
        stores.lock_strategy(7)  # type: ignore[arg-type]


def test_scanner_fires_due_timers_of_registered_machines(backend: Any):
    machines["ticket"].objects.send("ticket:t1", "BUMP", create=True)
    view = machines["ticket"].objects.get("ticket:t1")
    due = view.deadlines[0].due_ms
    scanner = stores.get_scanner()
    assert scanner.scan(now=due - 1).fired == 0
    result = scanner.scan(now=due + 1)
    assert result.fired == 1
    assert machines["ticket"].objects.get("ticket:t1").value == "stale"
    last = machines["ticket"].objects.latest("ticket:t1", 1)[0]
    assert last.actor == "xsm:timer"
    assert last.event_type == "xstate.after.60000.ticket.open"
