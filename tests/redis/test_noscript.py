"""NOSCRIPT after ``SCRIPT FLUSH`` recovers transparently, for single script
calls and for pipelined (``Many``) calls, without re-running anything that
already ran. SCRIPT FLUSH empties the cache of a whole server, so the real
server here is an own ``redis-server``, never the shared one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.redis.calls import Call
from django_xsm.redis.client import SyncDriver
from django_xsm.redis.core import Cmd, Many
from tests.redis.helpers import layout_of, snap, unit
from tests.redis.servers import RedisServer, needs_redis_server
from tests.support import Backends, fakeredis_client, redis_backends, unique_prefix

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def own_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(
    params=[
        "fakeredis",
        pytest.param("own-server", marks=[needs_redis_server, pytest.mark.fault]),
    ]
)
def nb(request: pytest.FixtureRequest) -> Backends:
    if request.param == "fakeredis":
        return redis_backends(fakeredis_client(), unique_prefix())
    server: RedisServer = request.getfixturevalue("own_server")
    return redis_backends(server.client(), unique_prefix())


def test_a_single_script_call_recovers_after_script_flush(nb: Backends) -> None:
    assert nb.store.save("k", snap(), expected_version=0) == 1
    nb.client.script_flush()
    assert nb.store.save("k", snap(items=1), expected_version=1) == 2
    nb.client.script_flush()
    assert nb.store.acquire_lock("k", "t", 1_000) == 0


def test_pipelined_script_calls_recover_after_script_flush(nb: Backends) -> None:
    for i in range(6):
        nb.store.commit(unit(f"k{i}", 0, snap(), next_due_ms=100 + i))
    nb.client.script_flush()
    assert [k for k, _ in nb.store.due_keys(1)] == [f"k{i}" for i in range(6)]
    nb.client.script_flush()
    assert list(nb.store.list_keys()) == [f"k{i}" for i in range(6)]


def test_a_pipeline_recovering_from_noscript_runs_nothing_twice(nb: Backends) -> None:
    """Only the calls that got NOSCRIPT are sent again; a command that
    already ran (here a non-idempotent INCR) is not repeated."""
    driver = SyncDriver(nb.client)
    counter = "{" + nb.store.prefix + ":0}:counter"
    layout = layout_of(nb.store)
    nb.client.script_flush()
    replies = driver.run(
        _gen(
            Many(
                (
                    Cmd("INCR", (counter,)),
                    Call("ACQUIRE_LOCK", [layout.lock("x")], ["tok", 5_000]),
                    Cmd("INCR", (counter,)),
                )
            )
        )
    )
    assert replies == [1, 0, 2]
    assert int(nb.client.get(counter)) == 2
    nb.client.delete(counter)


def test_a_flush_between_reload_and_retry_does_not_fail_the_call(
    nb: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of 'SCRIPT LOAD, then EVALSHA': another client flushes in
    between. Recovery must not depend on the cache surviving a round trip."""
    client = nb.client
    real_load = client.script_load

    def load_then_flush(script: Any) -> Any:
        sha = real_load(script)
        client.script_flush()
        return sha

    monkeypatch.setattr(client, "script_load", load_then_flush)
    nb.client.script_flush()
    assert nb.store.save("k", snap(), expected_version=0) == 1
    nb.client.script_flush()
    nb.store.commit(unit("d", 0, snap(), next_due_ms=5))
    nb.client.script_flush()
    assert nb.store.due_keys(1) == [("d", 5)]


def _gen(request: Any) -> Any:
    reply = yield request
    return reply


async def test_the_async_driver_recovers_from_noscript_without_re_running() -> None:
    import fakeredis
    import fakeredis.aioredis

    from django_xsm.redis import AsyncRedisStore
    from django_xsm.redis.client import AsyncDriver

    server = fakeredis.FakeServer()
    client = fakeredis.aioredis.FakeRedis(server=server)
    store = AsyncRedisStore(client, prefix=unique_prefix(), buckets=4)
    await store.commit(unit("k", 0, snap(), next_due_ms=5))
    await client.script_flush()
    assert (await store.commit(unit("k", 1, snap(items=1), next_due_ms=7))).version == 2
    await client.script_flush()
    assert await store.due_keys(1) == [("k", 7)]  # pipelined calls
    await client.script_flush()
    counter = "{" + store.prefix + ":0}:counter"
    replies = await AsyncDriver(client).run(
        _gen(
            Many(
                (
                    Cmd("INCR", (counter,)),
                    Call("ACQUIRE_LOCK", [store.layout.lock("x")], ["tok", 5_000]),
                    Cmd("INCR", (counter,)),
                )
            )
        )
    )
    assert replies == [1, 0, 2]
