"""RedisOutbox after a failure: retries wait for their time, dead letters
are listed, redriven and purged, damaged entries become dead letters
instead of crashing a worker, and the listings and stats say where
everything is.

Every test runs on fakeredis and, with ``XSM_REDIS_URL``, on a live server.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from django_xsm.exceptions import SnapshotCorruptError
from django_xsm.redis import RedisOutbox
from tests.redis.helpers import layout_of, namespace_state
from tests.redis.outbox_worker import BUCKETS, commit
from tests.support import Backends


@pytest.fixture
def ob(b: Backends) -> RedisOutbox:
    return RedisOutbox(b.client, prefix=b.store.prefix, buckets=BUCKETS)


def server_ms(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def kill_all(ob: RedisOutbox, error: str = "gone") -> list[str]:
    """Take everything and dead-letter it; the delivery ids, oldest first."""
    leases = ob.take("w", count=1000)
    assert all(ob.fail(lease, error, retry_at_ms=None) == "dead" for lease in leases)
    return [lease.entry.delivery_id for lease in leases]


def test_a_failure_waits_for_its_retry_time_then_comes_back_with_its_error(
    b: Backends, ob: RedisOutbox
) -> None:
    commit(b.store, "order:1", "PING")
    first, second = ob.take("w1")
    due = server_ms(b.client) + 300
    assert ob.fail(first, "HTTP 503 from billing", retry_at_ms=due) == "retry"
    assert ob.ack(second)
    assert not ob.ack(first)  # failed already
    (waiting, at), *_ = ob.waiting()
    assert (waiting.delivery_id, waiting.attempts, waiting.last_error, at) == (
        first.entry.delivery_id,
        1,
        "HTTP 503 from billing",
        due,
    )
    assert ob.stats()["retrying"] == 1 and ob.stats()["pending"] == 0
    assert ob.take("w2") == []  # not before its time
    time.sleep(0.35)
    (again,) = ob.take("w2")
    assert again.entry.delivery_id == first.entry.delivery_id
    assert again.entry.event == first.entry.event and again.entry.version == 1
    assert (again.entry.attempts, again.entry.last_error) == (1, "HTTP 503 from billing")
    assert again.entry.delivery().attempt == 2
    assert again.stream_id != first.stream_id  # behind what was emitted since
    assert ob.waiting() == [] and ob.stats()["retrying"] == 0
    # a second failure counts on
    assert ob.fail(again, "still down", retry_at_ms=0) == "retry"
    (third,) = ob.take("w3")
    assert (third.entry.attempts, third.entry.last_error) == (2, "still down")
    assert ob.ack(third)
    assert ob.stats() == {"pending": 0, "retrying": 0, "dead": 0, "lag_ms": 0}


def test_past_the_last_attempt_an_entry_becomes_a_dead_letter(b: Backends, ob: RedisOutbox) -> None:
    commit(b.store, "order:1", "PAY", amount=3)
    leases = ob.take("w")
    paid = leases[1]
    before = server_ms(b.client)
    assert ob.fail(paid, "x" * 5000, retry_at_ms=None) == "dead"
    (letter,) = ob.dead_letters()
    assert letter.entry.delivery_id == paid.entry.delivery_id
    assert letter.entry.event == {"type": "order.paid", "amount": 3}
    assert letter.entry.attempts == 1
    assert letter.entry.last_error == "x" * 2000  # truncated
    assert before <= letter.dead_ms <= server_ms(b.client)
    assert letter.bucket == paid.bucket
    assert ob.stats()["dead"] == 1
    for lease in (leases[0], leases[2]):
        assert ob.ack(lease)
    assert ob.take("w") == [] and ob.stats()["pending"] == 0
    assert ob.fail(paid, "again", retry_at_ms=None) == "lost"
    assert len(ob.dead_letters()) == 1


def test_redrive_keeps_the_delivery_id_and_resets_the_attempts(
    b: Backends, ob: RedisOutbox
) -> None:
    commit(b.store, "order:1", "PING")
    created, pong = ob.take("w")
    assert ob.fail(pong, "first", retry_at_ms=0) == "retry"
    (pong,) = ob.take("w")
    assert ob.fail(pong, "second", retry_at_ms=None) == "dead"
    assert ob.ack(created)
    assert ob.dead_letters()[0].entry.attempts == 2
    assert not ob.redrive("no-such-delivery-0")
    assert ob.redrive(pong.entry.delivery_id)
    assert not ob.redrive(pong.entry.delivery_id)  # moved already
    assert ob.dead_letters() == []
    (back,) = ob.take("w")
    assert back.entry.delivery_id == pong.entry.delivery_id
    assert back.entry.event == {"type": "pong"}
    assert back.entry.attempts == 0 and back.entry.delivery().attempt == 1
    assert back.entry.last_error == "second"  # what it died of, until it fails again
    assert ob.ack(back)


def test_redrive_all_with_and_without_a_limit(b: Backends, ob: RedisOutbox) -> None:
    for n in range(8):
        commit(b.store, f"order:{n}", "PAY")
    dead = kill_all(ob)
    assert len(dead) == 24
    assert len({letter.bucket for letter in ob.dead_letters(limit=100)}) > 1
    assert ob.redrive_all(limit=5) == 5
    assert ob.stats()["dead"] == 19 and ob.stats()["pending"] == 5
    assert ob.redrive_all(limit=1) == 1
    assert ob.redrive_all() == 18
    assert ob.redrive_all() == 0
    back = ob.take("w", count=1000)
    assert sorted(lease.entry.delivery_id for lease in back) == sorted(dead)
    assert all(lease.entry.attempts == 0 for lease in back)


def test_purge_dead_removes_only_what_died_before_the_cutoff(b: Backends, ob: RedisOutbox) -> None:
    for n in range(3):
        commit(b.store, f"order:{n}", "PING")
    old = kill_all(ob)
    time.sleep(0.4)
    commit(b.store, "order:9", "PING")
    young = kill_all(ob)
    assert ob.purge_dead(older_than_ms=60_000) == 0
    assert ob.purge_dead(older_than_ms=200, dry_run=True) == len(old) == 6
    assert len(ob.dead_letters()) == 8  # a dry run removes nothing
    assert ob.purge_dead(older_than_ms=200) == 6
    assert [d.entry.delivery_id for d in ob.dead_letters()] == young
    assert ob.purge_dead(older_than_ms=0) == 2
    assert ob.stats()["dead"] == 0


def test_dead_letters_page_oldest_first_across_buckets(b: Backends, ob: RedisOutbox) -> None:
    layout = layout_of(b.store)
    # the same stream id in two buckets: a cursor names its bucket too
    for bucket in (0, 1):
        b.client.xadd(layout.outbox_dead(bucket), {"id": f"x-{bucket}", "err": "e"}, id="5-0")
    for n in range(6):
        commit(b.store, f"order:{n}", "PING")
    kill_all(ob)
    everything = ob.dead_letters(limit=100)
    assert len(everything) == 14
    order = [(*map(int, d.stream_id.split("-")), d.bucket) for d in everything]
    assert order == sorted(order)
    # dead_ms is the dt field, stamped in the script that wrote the stream id
    # (the same script call: equal up to the call's own duration, long on a loaded machine)
    assert all(abs(d.dead_ms - int(d.stream_id.split("-")[0])) <= 250 for d in everything)
    first, second = everything[:2]
    assert [(d.stream_id, d.bucket) for d in (first, second)] == [("5-0", 0), ("5-0", 1)]
    assert second.entry.last_error == "e" and second.dead_ms == 5
    assert ob.dead_letters(limit=1, after=first.cursor) == [second]
    for size in (1, 5):
        paged, after = [], ""
        while page := ob.dead_letters(limit=size, after=after):
            paged += page
            after = page[-1].cursor
        assert paged == everything


def test_pending_and_waiting_say_where_each_entry_is(b: Backends, ob: RedisOutbox) -> None:
    commit(b.store, "order:1", "PAY")
    created, _paid = ob.take("w1", count=2)
    assert ob.fail(created, "later", retry_at_ms=server_ms(b.client) + 60_000) == "retry"
    rows = ob.pending()
    assert [(e.event_type, who) for e, who, _ in rows] == [
        ("order.paid", "w1"),
        ("order.notified", ""),
    ]
    assert all(0 <= idle < 10_000 for _, _, idle in rows)
    (entry, due), *_ = ob.waiting()
    assert entry.event_type == "order.created" and due > server_ms(b.client)
    stats = ob.stats()
    assert (stats["pending"], stats["retrying"], stats["dead"]) == (2, 1, 0)


def test_stats_lag_is_the_age_of_the_oldest_entry(b: Backends, ob: RedisOutbox) -> None:
    assert ob.stats() == {"pending": 0, "retrying": 0, "dead": 0, "lag_ms": 0}
    commit(b.store, "order:1", "PING")
    time.sleep(0.1)
    commit(b.store, "order:2", "PING")
    assert 100 <= ob.stats()["lag_ms"] < 5_000
    leases = ob.take("w")
    for lease in leases:
        if lease.entry.key == "order:1":
            assert ob.fail(lease, "later", retry_at_ms=server_ms(b.client) + 60_000) == "retry"
        else:
            assert ob.ack(lease)
    stats = ob.stats()
    assert (stats["pending"], stats["retrying"]) == (0, 2)
    assert stats["lag_ms"] >= 100  # the waiting entry still counts from its emission


def test_damaged_entries_become_dead_letters_instead_of_crashing(
    b: Backends, ob: RedisOutbox
) -> None:
    commit(b.store, "order:1", "PING")
    layout = layout_of(b.store)
    bucket = layout.bucket("order:1")
    stream = layout.outbox(bucket)
    good = {"k": "order:1", "m": "order", "v": "1", "e": '{"type": "x"}', "a": "0", "t": "1"}
    damaged = {
        "no-id": dict(good),
        "bad-json": {**good, "id": "d-1", "e": "{nope"},
        "not-an-object": {**good, "id": "d-2", "e": "[1, 2]"},
        "bad-version": {**good, "id": "d-3", "v": "one"},
    }
    for fields in damaged.values():
        b.client.xadd(stream, fields)
    # a waiting entry that is not a list of fields
    b.client.zadd(layout.outbox_retry(bucket), {"d-4": 0})
    b.client.hset(layout.outbox_waiting(bucket), "d-4", "garbage")
    leases = ob.take("w")
    assert [lease.entry.event_type for lease in leases] == ["order.created", "pong"]
    errors = {d.entry.delivery_id: d.entry.last_error for d in ob.dead_letters()}
    assert errors == {
        "": "damaged outbox entry: no delivery id (id) or no instance key (k)",
        "d-1": "damaged outbox entry: the event (e) is missing or not JSON",
        "d-2": "damaged outbox entry: the event (e) is not a JSON object",
        "d-3": "damaged outbox entry: v is missing or not a number >= 0",
        "d-4": "damaged retry entry: not a list of fields",
    }
    assert ob.stats()["pending"] == 2  # the damaged ones left the stream
    assert all(ob.ack(lease) for lease in leases)
    assert ob.take("w") == []
    # a dead letter without a delivery id cannot be redriven; the others can
    assert ob.redrive_all() == 4
    assert [d.entry.delivery_id for d in ob.dead_letters()] == [""]


def test_a_key_of_the_wrong_type_is_refused_before_any_write(b: Backends, ob: RedisOutbox) -> None:
    commit(b.store, "order:1", "PING")
    (lease, _) = ob.take("w")
    layout = layout_of(b.store)
    b.client.set(layout.outbox_dead(lease.bucket), "not a stream")
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(SnapshotCorruptError):
        ob.fail(lease, "boom", retry_at_ms=None)
    assert namespace_state(b.client, b.store.prefix) == before


def test_waiting_entries_are_stored_as_their_fields(b: Backends, ob: RedisOutbox) -> None:
    commit(b.store, "order:1", "PING")
    (lease, _) = ob.take("w")
    assert ob.fail(lease, "boom", retry_at_ms=12345) == "retry"
    layout = layout_of(b.store)
    raw = b.client.hget(layout.outbox_waiting(lease.bucket), lease.entry.delivery_id)
    flat = json.loads(raw)
    fields = dict(zip(flat[::2], flat[1::2], strict=True))
    assert fields["id"] == lease.entry.delivery_id and fields["k"] == "order:1"
    assert (fields["a"], fields["err"]) == ("1", "boom")
    score = b.client.zscore(layout.outbox_retry(lease.bucket), lease.entry.delivery_id)
    assert score == 12345
