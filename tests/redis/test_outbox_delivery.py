"""RedisOutbox, taking and acknowledging: what real commits emitted is
taken once, in order per instance, never by two consumers at once, and
again by another consumer once a lease outlives its visibility timeout.

Every test runs on fakeredis and, with ``XSM_REDIS_URL``, on a live server.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence import persisted
from django_xsm.persistence.outbox import Delivery
from django_xsm.redis import OutboxLease, RedisOutbox
from django_xsm.redis.outbox_entries import allocate
from tests.redis.helpers import layout_of, sent
from tests.redis.outbox_worker import BUCKETS, commit, emit_machine
from tests.support import Backends

#: A short visibility timeout (ms), long enough for a loaded test machine
#: not to cross it between two calls.
VT = 150


@pytest.fixture
def ob(b: Backends) -> RedisOutbox:
    return RedisOutbox(b.client, prefix=b.store.prefix, buckets=BUCKETS)


def server_ms(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def drain(ob: RedisOutbox, consumer: str = "w", **kw: Any) -> list[OutboxLease]:
    leases = ob.take(consumer, count=1000, **kw)
    for lease in leases:
        assert ob.ack(lease)
    return leases


def types_by_key(leases: list[OutboxLease]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for lease in leases:
        out.setdefault(lease.entry.key, []).append(lease.entry.event_type)
    return out


def test_entries_of_real_commits_are_taken_once_and_acked(b: Backends, ob: RedisOutbox) -> None:
    before = server_ms(b.client)
    commit(b.store, "order:1", "PAY", amount=7)
    commit(b.store, "order:2", "PING")
    commit(b.store, "order:3")  # a block that sends nothing creates nothing
    leases = ob.take("w1")
    assert types_by_key(leases) == {
        "order:1": ["order.created", "order.paid", "order.notified"],
        "order:2": ["order.created", "pong"],
    }
    paid = next(lease for lease in leases if lease.entry.event_type == "order.paid")
    entry = paid.entry
    assert entry.event == {"type": "order.paid", "amount": 7}
    assert (entry.machine, entry.version, entry.attempts, entry.last_error) == ("order", 1, 0, "")
    assert before <= entry.emitted_ms <= server_ms(b.client)
    assert entry.delivery_id.endswith("-1")  # the commit's second emitted event
    assert paid.bucket == layout_of(b.store).bucket("order:1")
    assert paid.consumer == "w1" and paid.deliveries == 1
    assert entry.delivery() == Delivery(entry.delivery_id, "order:1", "order", 1, 1)
    assert ob.stats()["pending"] == 5
    assert ob.take("w2") == []  # held by w1
    assert all(ob.ack(lease) for lease in leases)
    assert not ob.ack(leases[0])  # once
    assert ob.take("w1") == ob.take("w2") == []
    assert ob.stats() == {"pending": 0, "retrying": 0, "dead": 0, "lag_ms": 0}
    assert sum(b.client.xlen(layout_of(b.store).outbox(x)) for x in range(BUCKETS)) == 0


def test_a_block_that_raised_or_a_refused_event_emits_nothing(b: Backends, ob: RedisOutbox) -> None:
    with pytest.raises(RuntimeError, match="not committed"):
        with persisted(b.store, "order:1", emit_machine()) as inst:
            inst.send("PAY")
            raise RuntimeError("not committed")
    assert b.store.load("order:1") is None and ob.take("w") == []
    commit(b.store, "order:1", "PING")
    assert len(drain(ob)) == 2  # order.created, pong
    with pytest.raises(RuntimeError, match="warehouse down"):
        commit(b.store, "order:1", "BOOM")  # emitted order.lost, then failed
    commit(b.store, "order:1", "SHIP")  # refused in cart: no transition, nothing emitted
    assert ob.take("w") == []
    assert ob.stats()["pending"] == 0


def test_order_within_a_commit_and_across_commits_of_one_instance(
    b: Backends, ob: RedisOutbox
) -> None:
    commit(b.store, "order:1", "PING")
    commit(b.store, "order:1", "PING")
    commit(b.store, "order:1", "PAY")
    commit(b.store, "order:1", "SHIP")
    for n in range(12):
        commit(b.store, f"other:{n}", "PAY")
    # small takes interleave the buckets; one instance's entries keep their order
    seen: list[OutboxLease] = []
    while leases := ob.take("w", count=5):
        assert len(leases) <= 5
        seen += leases
        assert all(ob.ack(lease) for lease in leases)
    mine = [lease.entry for lease in seen if lease.entry.key == "order:1"]
    assert [e.event_type for e in mine] == [
        "order.created",
        "pong",
        "pong",
        "order.paid",
        "order.notified",
        "order.shipped",
    ]
    assert [e.version for e in mine] == [1, 1, 2, 3, 3, 4]
    assert [e.delivery_id[-2:] for e in mine] == ["-0", "-1", "-0", "-0", "-1", "-0"]
    assert len(seen) == 6 + 12 * 3
    assert len({lease.entry.delivery_id for lease in seen}) == len(seen)


def test_take_never_hands_out_more_than_count_and_reaches_every_bucket(
    b: Backends, ob: RedisOutbox
) -> None:
    layout = layout_of(b.store)
    keys = [f"order:{n}" for n in range(12)]
    for key in keys:
        commit(b.store, key, "PING")
    assert len({layout.bucket(k) for k in keys}) == BUCKETS
    taken = []
    for _ in range(2 * len(keys)):
        leases = ob.take("w", count=1)
        assert len(leases) == 1  # something is left somewhere: found, whichever bucket
        taken += leases
    assert ob.take("w", count=1) == []
    assert sorted(lease.entry.key for lease in taken) == sorted(keys * 2)
    for lease in taken:
        assert ob.ack(lease)


def test_allocate_splits_evenly_within_what_each_bucket_offers() -> None:
    assert allocate(10, {0: 100, 1: 100, 2: 100, 3: 100}, 0) == {0: 3, 1: 3, 2: 2, 3: 2}
    assert allocate(10, {0: 100, 1: 100, 2: 100, 3: 100}, 1) == {1: 3, 2: 3, 3: 2, 0: 2}
    assert allocate(10, {0: 1, 1: 0, 2: 100, 3: 2}, 0) == {0: 1, 2: 7, 3: 2}
    assert allocate(2, {0: 5, 1: 5, 2: 5}, 2) == {2: 1, 0: 1}
    assert allocate(100, {0: 3, 1: 4}, 0) == {0: 3, 1: 4}
    assert allocate(0, {0: 3}, 0) == {} == allocate(5, {}, 3)


def test_two_consumers_never_hold_the_same_entry(b: Backends, ob: RedisOutbox) -> None:
    for n in range(20):
        commit(b.store, f"order:{n}", "PAY")  # 60 entries
    acked: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def worker(name: str) -> None:
        mine = RedisOutbox(b.client, prefix=b.store.prefix, buckets=BUCKETS)
        start.wait()
        while leases := mine.take(name, count=4):
            for lease in leases:
                assert mine.ack(lease), lease
                with lock:
                    acked.append(lease.entry.delivery_id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(acked) == 60
    assert max(Counter(acked).values()) == 1
    assert ob.stats()["pending"] == 0


def test_a_lease_past_the_visibility_timeout_goes_to_another_consumer(
    b: Backends, ob: RedisOutbox
) -> None:
    commit(b.store, "order:1", "PAY")
    first = ob.take("w1", visibility_timeout_ms=VT)
    assert len(first) == 3
    assert ob.take("w2", visibility_timeout_ms=VT) == []  # not idle long enough yet
    time.sleep(VT / 1000 + 0.05)
    again = ob.take("w2", visibility_timeout_ms=VT)
    assert [a.entry.delivery_id for a in again] == [f.entry.delivery_id for f in first]
    assert all(a.consumer == "w2" and a.deliveries == 2 for a in again)
    # the delivery that ended without ack or fail counts as an attempt
    assert [a.entry.attempts for a in again] == [1, 1, 1]
    assert again[0].entry.delivery().attempt == 2
    assert not ob.ack(first[0])  # the first consumer's late ack is refused
    assert ob.fail(first[1], "late", retry_at_ms=0) == "lost"
    assert ob.fail(first[2], "late", retry_at_ms=None) == "lost"
    stats = ob.stats()
    assert (stats["pending"], stats["retrying"], stats["dead"]) == (3, 0, 0)
    assert all(ob.ack(a) for a in again)
    assert ob.stats()["pending"] == 0


def test_a_lease_reclaimed_by_the_same_consumer_name_is_lost_too(
    b: Backends, ob: RedisOutbox
) -> None:
    commit(b.store, "order:1", "PING")
    (old,) = ob.take("w1", count=1, visibility_timeout_ms=VT)
    time.sleep(VT / 1000 + 0.05)
    (new,) = ob.take("w1", count=1, visibility_timeout_ms=VT)
    assert (new.stream_id, new.deliveries) == (old.stream_id, 2)
    assert not ob.ack(old)  # the delivery count moved on
    assert ob.ack(new)


def test_round_trips_per_take(b: Backends, ob: RedisOutbox) -> None:
    ob.take("w")  # reads the schema marker, creates the groups
    with sent(b.client) as idle:
        assert ob.take("w") == []
    assert [[c[0] for c in trip] for trip in idle.trips] == [["OUTBOX_PROMOTE"] * BUCKETS]
    commit(b.store, "order:1", "PAY")
    bucket = layout_of(b.store).bucket("order:1")
    with sent(b.client) as fresh:
        first = ob.take("w", visibility_timeout_ms=VT)
    assert [[c[0] for c in trip] for trip in fresh.trips] == [
        ["OUTBOX_PROMOTE"] * BUCKETS,
        ["OUTBOX_READ"],  # only the bucket that has something
    ]
    assert fresh.trips[1][0][2] == layout_of(b.store).outbox(bucket)  # name, numkeys, key
    time.sleep(VT / 1000 + 0.05)
    with sent(b.client) as reclaim:
        again = ob.take("w2", visibility_timeout_ms=VT)
    assert [[c[0] for c in trip] for trip in reclaim.trips] == [
        ["OUTBOX_PROMOTE"] * BUCKETS,
        ["OUTBOX_RECLAIM"],
    ]
    assert len(again) == len(first) == 3


def test_the_group_starts_at_the_beginning_of_the_stream(b: Backends) -> None:
    commit(b.store, "order:1", "PAY")  # before any outbox or group existed
    late = RedisOutbox(b.client, prefix=b.store.prefix, group="late-group")
    assert len(late.take("w")) == 3
    info = b.client.xinfo_groups(layout_of(b.store).outbox(layout_of(b.store).bucket("order:1")))
    assert [g["name"] for g in info] == [b"late-group"]


def test_arguments_are_checked_before_any_io(b: Backends, ob: RedisOutbox) -> None:
    for kwargs in ({"count": 0}, {"count": True}, {"visibility_timeout_ms": 0}):
        with pytest.raises(InvalidConfigError):
            ob.take("w", **kwargs)
    with pytest.raises(InvalidConfigError):
        ob.take("")
    with pytest.raises(InvalidConfigError):
        RedisOutbox(b.client, prefix=b.store.prefix, group="")
    commit(b.store, "order:1", "PING")
    lease, _ = ob.take("w")
    with pytest.raises(InvalidConfigError):
        ob.ack("not a lease")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError):
        ob.ack(OutboxLease(lease.entry, lease.stream_id, BUCKETS, "w", 1))
    with pytest.raises(InvalidConfigError):
        ob.fail(lease, "x", retry_at_ms=-1)
    with pytest.raises(InvalidConfigError):
        ob.purge_dead(older_than_ms=-5)
    with pytest.raises(InvalidConfigError):
        ob.dead_letters(after="nope")
    for cursor in ("\u0663-\u0663", "1-1/\u00b2", "1-1/" + "9" * 5000, "1-1/-1"):
        with pytest.raises(InvalidConfigError, match=r"DeadLetter\.cursor"):
            ob.dead_letters(after=cursor)
    assert ob.dead_letters(after="1-1/") == ob.dead_letters(after="1-1")
    assert ob.ack(lease)


def test_construction_does_no_io() -> None:
    ob = RedisOutbox("redis://127.0.0.1:1/0", prefix="nowhere")
    assert repr(ob) == "<RedisOutbox prefix='nowhere'>"


def test_ack_many_acknowledges_a_batch_in_one_round_trip(b: Backends, ob: RedisOutbox) -> None:
    for n in range(3):
        commit(b.store, f"order:m{n}", "PAY")
    leases = ob.take("w1", count=100)
    assert len(leases) >= 3  # PAY emits more than one event
    with sent(b.client) as acks:
        assert ob.ack_many(leases) == [True] * len(leases)
    assert [[c[0] for c in trip] for trip in acks.trips] == [["OUTBOX_ACK"] * len(leases)]
    assert ob.ack_many(leases) == [False] * len(leases)  # already acknowledged
    assert ob.ack_many([]) == [] and ob.stats()["pending"] == 0
