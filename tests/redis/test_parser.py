"""The reply parser the test suite runs with is the one the project installs.

The ``test`` extra pulls in ``django-xsm[hiredis]`` (redis-py's C parser,
the recommendation in docs/benchmarks.md), so every Redis test of a
bootstrapped virtualenv — CI's included — exercises redis-py with hiredis:
script replies, error replies, binary snapshots, pipelines. These tests fail
when the environment drifted from that (hiredis missing, or redis-py not
using it), instead of the suite silently testing the pure-Python parser.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
import redis
import redis.asyncio

from django_xsm.exceptions import StoreError
from django_xsm.redis import AsyncRedisStore, RedisStore
from tests.support import LIVE_URL, delete_namespace, unique_prefix

ROOT = Path(__file__).resolve().parents[2]


def extras() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(data["project"]["optional-dependencies"])


def test_the_test_extra_installs_hiredis() -> None:
    table = extras()
    assert any(req.startswith("hiredis") for req in table["hiredis"])
    self_refs = [r for r in table["test"] if r.startswith("django-xsm[")]
    wanted = {x.strip() for r in self_refs for x in re.findall(r"\[(.*)\]", r)[0].split(",")}
    assert "hiredis" in wanted


def test_redis_py_uses_the_hiredis_parser_the_test_extra_installed() -> None:
    assert importlib.util.find_spec("hiredis") is not None, (
        "hiredis is not installed: reinstall the virtualenv with the test extra "
        "(scripts/_bootstrap.sh does it when pyproject.toml changed)"
    )
    from redis.utils import HIREDIS_AVAILABLE

    assert HIREDIS_AVAILABLE
    # the clients django-xsm builds from a URL use it, sync and asyncio
    store = RedisStore("redis://127.0.0.1:1/0", prefix=unique_prefix())
    conn = store.client.connection_pool.make_connection()
    assert type(conn._parser).__name__ == "_HiredisParser"
    aconn = redis.asyncio.Redis.from_url("redis://127.0.0.1:1/0").connection_pool.make_connection()
    assert type(aconn._parser).__name__ == "_AsyncHiredisParser"


@pytest.mark.live
def test_script_errors_and_binary_snapshots_cross_the_hiredis_parser() -> None:
    """A script's error reply and a binary value read the same through
    hiredis as through the pure-Python parser (exercised on a live server)."""
    if not LIVE_URL:
        pytest.skip("needs XSM_REDIS_URL")
    prefix = unique_prefix()
    client = redis.Redis.from_url(LIVE_URL)
    store = RedisStore(client, prefix=prefix)
    try:
        odd = "\u00e9\x00\xff"
        store.save("order:1", {"value": "cart", "context": {"b": odd}}, expected_version=0)
        record = store.load("order:1")
        assert record is not None and record.snapshot["context"]["b"] == odd
        layout = store.layout
        assert layout is not None
        client.delete(layout.snapshot("order:2"))
        client.set(layout.snapshot("order:2"), "not a hash")
        with pytest.raises(StoreError):
            store.load("order:2")
    finally:
        delete_namespace(client, prefix)

    async def twin() -> None:
        aclient = redis.asyncio.Redis.from_url(LIVE_URL)
        astore = AsyncRedisStore(aclient, prefix=prefix)
        try:
            await astore.save("order:1", {"value": "cart", "context": {}}, expected_version=0)
            assert (await astore.load("order:1")) is not None
        finally:
            await aclient.aclose()

    try:
        asyncio.run(twin())
    finally:
        delete_namespace(client, prefix)
