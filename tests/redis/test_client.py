"""Clients: one built from a URL gets 5 s socket and connect timeouts; a
client passed in keeps its own settings; clients that cannot work are
refused clearly at construction."""

from __future__ import annotations

from typing import Any

import fakeredis
import fakeredis.aioredis
import pytest
import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_xsm.exceptions import InvalidConfigError
from django_xsm.redis import (
    AsyncRedisInbox,
    AsyncRedisLog,
    AsyncRedisStore,
    RedisInbox,
    RedisLog,
    RedisStore,
)
from django_xsm.redis.client import DEFAULT_TIMEOUT_S
from tests.redis.servers import free_port
from tests.support import LIVE_URL, delete_namespace, unique_prefix

SYNC = (RedisStore, RedisInbox, RedisLog)
ASYNC = (AsyncRedisStore, AsyncRedisInbox, AsyncRedisLog)


def timeouts(client: Any) -> tuple[Any, Any]:
    kw = client.connection_pool.connection_kwargs
    return kw.get("socket_timeout"), kw.get("socket_connect_timeout")


@pytest.fixture
def url() -> str:
    """The live server when there is one, else a port nobody listens on
    (construction must not need a reachable server)."""
    return LIVE_URL or f"redis://127.0.0.1:{free_port()}/0"


@pytest.mark.parametrize("cls", SYNC)
def test_a_url_built_client_has_5_s_timeouts(cls: Any, url: str) -> None:
    prefix = unique_prefix()
    obj = cls(url, prefix=prefix)
    try:
        assert DEFAULT_TIMEOUT_S == 5.0
        assert timeouts(obj.client) == (5.0, 5.0)
    finally:
        if LIVE_URL:
            delete_namespace(obj.client, prefix)


def test_objects_built_from_one_url_share_a_pool_and_one_script_commits(url: str) -> None:
    prefix = unique_prefix()
    store = RedisStore(url, prefix=prefix)
    inbox, log = RedisInbox(url, prefix=prefix), RedisLog(url, prefix=prefix)
    try:
        assert inbox.client.connection_pool is store.client.connection_pool
        assert store.shares_commit(inbox) and store.shares_commit(log)
    finally:
        if LIVE_URL:
            delete_namespace(store.client, prefix)


@pytest.mark.parametrize("cls", ASYNC)
async def test_an_async_url_built_client_has_5_s_timeouts(cls: Any, url: str) -> None:
    obj = cls(url, prefix=unique_prefix())
    assert timeouts(obj.client) == (5.0, 5.0)
    await obj.client.aclose()


@pytest.mark.parametrize("cls", SYNC)
def test_a_client_passed_in_keeps_its_own_settings(cls: Any) -> None:
    port, once = free_port(), Retry(NoBackoff(), 0)  # (the marker read fails fast)
    for given in (
        redis.Redis(port=port, socket_timeout=1.25, socket_connect_timeout=0.75, retry=once),
        redis.Redis(port=port, retry=once),  # no timeouts at all: the caller's choice
    ):
        obj = cls(given, prefix="p")
        assert obj.client is given
        assert timeouts(obj.client) == timeouts(given)


@pytest.mark.parametrize("cls", ASYNC)
async def test_an_async_client_passed_in_keeps_its_own_settings(cls: Any) -> None:
    given = redis.asyncio.Redis(port=free_port(), socket_timeout=1.25)
    obj = cls(given, prefix="p")
    assert obj.client is given and timeouts(obj.client) == timeouts(given)
    assert timeouts(given)[0] == 1.25
    await given.aclose()


@pytest.mark.parametrize("cls", SYNC + ASYNC)
@pytest.mark.parametrize("bad", ["http://x", "redis-cluster://x", "", 42, object()])
def test_unusable_urls_and_objects_are_invalid_config(cls: Any, bad: Any) -> None:
    with pytest.raises(InvalidConfigError) as err:
        cls(bad, prefix="p")
    assert err.value.path == "client_or_url"


@pytest.mark.parametrize("cls", SYNC)
def test_an_asyncio_client_is_refused_by_the_sync_classes(cls: Any) -> None:
    with pytest.raises(InvalidConfigError, match="asyncio"):
        cls(fakeredis.aioredis.FakeRedis(), prefix="p")


@pytest.mark.parametrize("cls", ASYNC)
def test_a_blocking_client_is_refused_by_the_async_classes(cls: Any) -> None:
    with pytest.raises(InvalidConfigError, match="blocking"):
        cls(fakeredis.FakeRedis(), prefix="p")


@pytest.mark.parametrize(
    ("cls", "client"),
    [
        (RedisStore, lambda: fakeredis.FakeRedis(decode_responses=True)),
        (RedisInbox, lambda: fakeredis.FakeRedis(decode_responses=True)),
        (RedisLog, lambda: fakeredis.FakeRedis(decode_responses=True)),
        (AsyncRedisStore, lambda: fakeredis.aioredis.FakeRedis(decode_responses=True)),
    ],
)
def test_a_client_that_decodes_responses_is_refused(cls: Any, client: Any) -> None:
    """Snapshots are bytes (an encrypting codec's too): a client that decodes
    replies to str would make every record look damaged."""
    with pytest.raises(InvalidConfigError, match="decode_responses"):
        cls(client(), prefix="p")
