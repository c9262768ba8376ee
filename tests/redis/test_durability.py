"""Replicated durability (``min_replicas``): WAIT after every commit.

Real servers only: a primary and a replica started on free loopback ports,
stopped by pid. Pausing the replica (SIGSTOP) makes it miss the WAIT
deadline, which is what a lagging or partitioned replica looks like to the
primary. See the Topologies section of docs/redis.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.exceptions import InvalidConfigError, NotDurableError
from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, persisted
from django_xsm.redis import RedisInbox, RedisLog, RedisStore
from django_xsm.redis.keys import KeyLayout
from tests.redis.servers import RedisServer, needs_redis_server, redis_server, wait_until
from tests.support import order_machine, snap, unique_prefix

pytestmark = [needs_redis_server, pytest.mark.fault]


@pytest.fixture
def pair() -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary and one replica with its link up."""
    primary = RedisServer().start()
    replica = None
    try:
        replica = RedisServer(extra=["--replicaof", "127.0.0.1", str(primary.port)]).start()
        link = replica.client()
        wait_until(
            lambda: link.info("replication").get("master_link_status") == "up",
            timeout=15,
            what="the replica's link",
        )
        link.close()
        yield primary, replica
    finally:
        if replica is not None:
            replica.cleanup()
        primary.cleanup()


def _parts(client: Any, prefix: str, **durability: Any) -> tuple[RedisStore, list[Any]]:
    store = RedisStore(client, prefix=prefix, buckets=4, **durability)
    inbox = RedisInbox(client, prefix=prefix, buckets=4, **durability)
    log = RedisLog(client, prefix=prefix, buckets=4)
    return store, [IdempotencyPlugin(inbox), AuditPlugin(log)]


def _deliver(store: RedisStore, plugins: list[Any], key: str = "order:1") -> int:
    with persisted(store, key, order_machine(), plugins=plugins) as inst:
        inst.send("ADD", idempotency_key="evt-1", actor="client")
        return int(inst.context["items"])


@pytest.mark.timeout(60)
def test_a_healthy_replica_acknowledges_every_commit(pair: tuple[RedisServer, RedisServer]):
    primary, replica = pair
    # a generous WAIT: on a loaded machine a healthy replica may take more
    # than the default 100 ms to acknowledge
    store, plugins = _parts(
        primary.client(), unique_prefix(), min_replicas=1, replica_timeout_ms=5_000
    )
    assert _deliver(store, plugins) == 1
    assert store.save("plain", snap(), expected_version=0) == 1
    # what WAIT acknowledged is on the replica already, not "soon"
    assert replica.client().exists(store.layout.snapshot("order:1")) == 1  # type: ignore[union-attr]


@pytest.mark.timeout(60)
def test_a_paused_replica_makes_every_commit_not_durable_and_no_replay_acknowledges_it(
    pair: tuple[RedisServer, RedisServer],
):
    primary, replica = pair
    store, plugins = _parts(primary.client(), unique_prefix(), min_replicas=1)
    replica.pause()
    try:
        with pytest.raises(NotDurableError) as err:
            _deliver(store, plugins)
        assert (err.value.required, err.value.acknowledged) == (1, 0)
        assert err.value.key == "order:1" and err.value.version == 1
        # the retry finds the commit done, but the replica still lacks it:
        # replaying would acknowledge what a failover can lose
        with pytest.raises(NotDurableError):
            _deliver(store, plugins)
        with pytest.raises(NotDurableError):
            store.save("plain", snap(), expected_version=0)
    finally:
        replica.resume()
    wait_until(
        lambda: replica.client().exists(store.layout.snapshot("order:1")),  # type: ignore[union-attr]
        timeout=15,
        what="the replica to catch up",
    )
    assert _deliver(store, plugins) == 1  # replayed, not applied twice
    record = store.load("order:1")
    assert record is not None and record.version == 1


@pytest.mark.timeout(60)
def test_a_commit_lost_in_a_failover_is_applied_once_by_the_retry(
    pair: tuple[RedisServer, RedisServer],
):
    primary, replica = pair
    prefix = unique_prefix()
    store, plugins = _parts(primary.client(), prefix, min_replicas=1, replica_timeout_ms=50)
    assert store.health()["ok"]  # the namespace exists on both
    promoted = replica.client()
    wait_until(
        lambda: promoted.exists(KeyLayout.schema_key_for(prefix)), timeout=15, what="replication"
    )
    # the replica is cut off (as by a partition), so it never sees the commit
    promoted.execute_command("REPLICAOF", "NO", "ONE")
    with pytest.raises(NotDurableError):
        _deliver(store, plugins)
    primary.kill9()  # the primary dies with the only copy; clients fail over
    store2, plugins2 = _parts(promoted, prefix, min_replicas=0)
    assert store2.load("order:1") is None  # the unacknowledged commit is gone
    assert _deliver(store2, plugins2) == 1  # the retry applies it, once
    assert _deliver(store2, plugins2) == 1  # and replays it from then on
    record = store2.load("order:1")
    assert record is not None and record.version == 1


@pytest.mark.timeout(30)
def test_without_replicas_min_replicas_refuses_every_commit_and_says_why():
    with redis_server() as server:
        store, _ = _parts(server.client(), unique_prefix(), min_replicas=2, replica_timeout_ms=20)
        with pytest.raises(NotDurableError) as err:
            store.save("k", snap(), expected_version=0)
        assert (err.value.required, err.value.acknowledged) == (2, 0)
        assert "only 0 of the 2 required replica(s)" in str(err.value)
        assert "MIN_REPLICAS" in str(err.value)  # the hint names the setting


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"min_replicas": -1}, "min_replicas"),
        ({"min_replicas": True}, "min_replicas"),
        ({"min_replicas": 17}, "min_replicas"),
        ({"min_replicas": "1"}, "min_replicas"),
        ({"min_replicas": 1, "replica_timeout_ms": 0}, "replica_timeout_ms"),
        ({"min_replicas": 1, "replica_timeout_ms": 1.5}, "replica_timeout_ms"),
    ],
)
def test_bad_durability_arguments_are_refused_at_construction(kwargs: dict[str, Any], path: str):
    with pytest.raises(InvalidConfigError) as err:
        RedisStore("redis://127.0.0.1:1/0", prefix="p", **kwargs)
    assert err.value.path == path


def test_the_default_waits_for_no_replica():
    store = RedisStore("redis://127.0.0.1:1/0", prefix="p")
    assert (store.min_replicas, store.replica_timeout_ms) == (0, 100)


@pytest.mark.timeout(60)
def test_wait_rides_in_the_commit_round_trip(
    pair: tuple[RedisServer, RedisServer], monkeypatch: pytest.MonkeyPatch
):
    import redis.connection

    primary, _ = pair
    store, plugins = _parts(primary.client(), unique_prefix(), min_replicas=1)
    assert _deliver(store, plugins, key="warm") == 1  # scripts and marker loaded
    sent: list[bytes] = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> Any:
        sent.append(b"".join(command) if isinstance(command, list) else command)
        return original(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    with persisted(
        store, "order:rt", order_machine(), plugins=plugins, idempotency_key="k-rt"
    ) as inst:
        inst.send("ADD")
    assert len(sent) == 2  # open; commit + WAIT in one pipeline
    assert b"WAIT" in sent[1] and b"EVALSHA" in sent[1]


def test_sentinel_clients_are_the_same_server_only_for_the_same_service_and_sentinels():
    from redis.sentinel import Sentinel

    from django_xsm.redis.client import same_server

    # building Sentinel clients does no I/O
    one = Sentinel([("127.0.0.1", 26379), ("127.0.0.1", 26380)])
    same = Sentinel([("127.0.0.1", 26380), ("127.0.0.1", 26379)])
    other = Sentinel([("127.0.0.1", 26381)])
    a = one.master_for("mymaster")
    assert same_server(a, same.master_for("mymaster"))
    assert not same_server(a, one.master_for("other"))
    assert not same_server(a, other.master_for("mymaster"))
    assert not same_server(a, one.master_for("mymaster", db=1))
