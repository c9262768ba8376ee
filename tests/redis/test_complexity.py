"""Cost in commands, not in time: ``due_keys``, a log page, a list page,
``purge_expired`` and ``prune_expired`` run the same commands with 100 and
with 3 000 instances (``INFO commandstats`` counts the commands scripts run
too), and nothing in the request path ever scans the keyspace.

Each test runs on its own redis-server: ``CONFIG RESETSTAT`` must not
disturb the shared one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, persisted
from django_xsm.persistence.records import ClaimRequest, InboxMark
from django_xsm.redis import RedisStore
from django_xsm.redis.client import SOURCES
from tests.redis.helpers import entry, snap, unit
from tests.redis.servers import RedisServer, needs_redis_server, server_version, wait_until
from tests.support import Backends, order_machine, redis_backends, unique_prefix

pytestmark = [needs_redis_server, pytest.mark.fault, pytest.mark.timeout(120)]

SMALL, BIG = 100, 3_000
FAR = 4_000_000_000_000  # a due time nobody reaches in these tests
# Redis 6.2 counts CONFIG RESETSTAT itself as "config" (7 as "config|resetstat").
_RESETSTAT_BEFORE_7 = ("cmdstat_config",) if server_version() < (7, 0) else ()


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer().start()
    try:
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def nb(server: RedisServer) -> Backends:
    return redis_backends(server.client(), unique_prefix(), buckets=4)


def commands(client: Any, action: Callable[[], Any]) -> dict[str, int]:
    """Commands (and commands run by scripts) that ``action`` caused; the
    script cache is warmed first (a cold cache adds one EVAL per script)."""
    for script in SOURCES.values():
        client.script_load(script)
    client.config_resetstat()
    action()
    stats = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(v["calls"])
        for name, v in stats.items()
        if name not in ("cmdstat_config|resetstat", "cmdstat_info", *_RESETSTAT_BEFORE_7)
    }


def grow(b: Backends, start: int, stop: int, **kw: Any) -> None:
    pipe_size = 200
    for lo in range(start, stop, pipe_size):
        for i in range(lo, min(stop, lo + pipe_size)):
            b.store.commit(unit(f"n:{i:05d}", 0, snap(), state_ids=("order",), **kw))


def test_due_keys_cost_follows_the_due_entries_not_the_instances(nb: Backends) -> None:
    for i in range(5):
        nb.store.commit(unit(f"due:{i}", 0, snap(), next_due_ms=1_000 + i))
    grow(nb, 0, SMALL, next_due_ms=FAR)
    small = commands(nb.client, lambda: nb.store.due_keys(10, limit=100))
    grow(nb, SMALL, BIG, next_due_ms=FAR)
    big = commands(nb.client, lambda: nb.store.due_keys(10, limit=100))
    assert small == big
    assert big["exists"] == 5  # one look per due entry
    assert big["zrangebyscore"] == 4  # one range read per bucket
    assert nb.store.due_keys(10) == [(f"due:{i}", 1_000 + i) for i in range(5)]


def test_a_log_page_costs_the_page_not_the_log(nb: Backends) -> None:
    def append(n: int) -> None:
        for _ in range(n):
            nb.log.append_next("order:1", entry(), version=1)

    append(SMALL)
    page = lambda: nb.log.read("order:1", after_seq=50, limit=10)  # noqa: E731
    small = commands(nb.client, page)
    append(BIG - SMALL)
    big = commands(nb.client, page)
    assert small == big == {"xrange": 1}
    assert [r.seq for r in page()] == list(range(51, 61))
    assert commands(nb.client, lambda: nb.log.read_last("order:1", count=5)) == {"xrevrange": 1}


def test_a_list_page_costs_the_page_not_the_namespace(nb: Backends) -> None:
    grow(nb, 0, SMALL)
    small = commands(nb.client, lambda: nb.store.list_page("n:", limit=10))
    grow(nb, SMALL, BIG)
    big = commands(nb.client, lambda: nb.store.list_page("n:", limit=10))
    assert small == big
    assert big["exists"] <= 4 * (10 + 1)  # a page and one more per bucket
    page, cursor = nb.store.list_page("n:", limit=10)
    assert page == [f"n:{i:05d}" for i in range(10)] and cursor == "n:00009"


def test_purge_expired_costs_the_expired_rows(nb: Backends) -> None:
    def claims(prefix: str, n: int, lease_ms: int) -> None:
        for i in range(n):
            nb.inbox.claim(ClaimRequest("acct", f"{prefix}{i}", "idem", "fp", "w", lease_ms))

    claims("short:", 5, 1)
    claims("long:", SMALL, 3_600_000)
    small = commands(nb.client, lambda: time.sleep(0.01) or nb.inbox.purge_expired())
    assert small.get("hdel") == 5
    claims("short:", 5, 1)
    claims("long:", BIG, 3_600_000)
    big = commands(nb.client, lambda: time.sleep(0.01) or nb.inbox.purge_expired())
    assert small == big


def test_prune_expired_costs_the_expired_instances(nb: Backends) -> None:
    short = RedisStore(nb.client, prefix=nb.store.prefix, ttl_s=0.05, buckets=4)
    long_lived = RedisStore(nb.client, prefix=nb.store.prefix, ttl_s=3_600, buckets=4)

    def expiring(round_: int, n: int) -> None:
        names = [f"x:{round_}:{i}" for i in range(n)]
        for name in names:
            short.commit(unit(name, 0, snap()))
            long_lived.commit(unit(f"l:{round_}:{name}", 0, snap()))
        wait_until(
            lambda: all(short.load(name) is None for name in names),
            timeout=5,
            what="short-lived instances to expire",
        )

    def measure() -> dict[str, int]:
        return commands(nb.client, nb.store.prune_expired)

    expiring(1, 5)
    grow(nb, 0, SMALL)
    small = measure()
    # per expired key: its snapshot's PTTL and its log stream's EXISTS
    assert (small["pttl"], small["exists"]) == (5, 5)
    expiring(2, 5)
    grow(nb, SMALL, BIG)
    assert measure() == small


def test_nothing_in_the_request_path_scans_the_keyspace(nb: Backends) -> None:
    m = order_machine()
    plugins = [IdempotencyPlugin(nb.inbox, principal=lambda e: "acct"), AuditPlugin(nb.log)]

    def request_path() -> None:
        for i in range(20):
            with persisted(nb.store, f"order:{i}", m, plugins=plugins) as inst:
                inst.send("ADD", idempotency_key=f"evt{i}", actor="alice")
            with persisted(nb.store, f"order:{i}", m, plugins=plugins) as inst:
                inst.send("ADD", idempotency_key=f"evt{i}", actor="alice")
                inst.send("PAY")
        c = ClaimRequest("acct", "order:0", "k", "fp", "w", 1_000)
        nb.inbox.claim(c)
        nb.inbox.mark(InboxMark(c, {}, 1_000))
        nb.store.due_keys(time.time())
        list(nb.store.list_keys("order:"))
        nb.store.list_page(state="order.paid")
        nb.log.read("order:1")
        nb.store.prune_expired()
        nb.inbox.purge_expired()
        nb.log.purge_older_than(0)
        nb.store.delete("order:3")
        nb.store.forget("order:4")

    used = commands(nb.client, request_path)
    assert used, "nothing was measured"
    for scan in ("scan", "keys", "hscan", "zscan", "sscan"):
        assert scan not in used, f"{scan} in the request path: {used}"
