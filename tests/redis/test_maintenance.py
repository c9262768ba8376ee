"""The maintenance methods the operations commands use: what they return,
that the read-only ones write nothing, and what they cost, counted in
round trips and commands sent (``sent()``: a command-counting connection,
so the shared live server is never reset). Runs on fakeredis and live.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.records import ClaimRequest
from django_xsm.redis import inbox as inbox_module
from django_xsm.redis import log as log_module
from django_xsm.redis.keys import SEP
from tests.redis.helpers import entry, layout_of, namespace_state, sent, snap, unit
from tests.redis.servers import wait_until
from tests.support import Backends

BASE = 1_800_000_000_000  # ms; log timestamps
HOUR = 3_600_000


def claim(
    b: Backends, key: str, idem: str = "k", *, scope: str = "acct", lease: int = HOUR
) -> None:
    b.inbox.claim(ClaimRequest(scope, key, idem, "fp", "w", lease))


def expire(b: Backends, rows: int, *, prefix: str = "gone") -> None:
    """``rows`` rows on as many instances (spread over the buckets), then
    wait until the server's clock has passed their 1 ms lease."""
    before = b.inbox.count_expired()
    for i in range(rows):
        claim(b, f"{prefix}:{i}", lease=1)
    wait_until(lambda: b.inbox.count_expired() == before + rows, timeout=5, what="rows expiring")


def same_bucket(b: Backends, key: str, count: int, stem: str = "n") -> list[str]:
    """``count`` other keys in the bucket of ``key``."""
    layout = layout_of(b.store)
    found, i = [], 0
    while len(found) < count:
        if layout.bucket(f"{stem}:{i}") == layout.bucket(key):
            found.append(f"{stem}:{i}")
        i += 1
    return found


# --- RedisStore.machine_ids ------------------------------------------------------------


def test_machine_ids_reads_many_keys_in_one_round_trip(b: Backends) -> None:
    keys = [f"order:{i}" for i in range(20)]
    for i, key in enumerate(keys):
        b.store.commit(unit(key, 0, snap(), machine_id="order" if i % 2 else "other"))
    b.store.save("gone", snap(), expected_version=0)
    b.store.delete("gone")
    with sent(b.client) as seen:
        found = b.store.machine_ids([*keys, "gone", "never"])
    assert found == {
        **{k: "order" if i % 2 else "other" for i, k in enumerate(keys)},
        "gone": "",
        "never": "",
    }
    assert len(seen.trips) == 1 and seen.names() == ["HGET"] * 22  # no snapshot decoded


def test_machine_ids_of_a_record_committed_without_one_reads_its_snapshot(b: Backends) -> None:
    b.store.commit(unit("blank", 0, snap(), machine_id=""))
    b.store.commit(unit("named", 0, snap(), machine_id="other"))
    with sent(b.client) as seen:
        assert b.store.machine_ids(["blank", "named"]) == {"blank": "order", "named": "other"}
    assert [[c[0] for c in trip] for trip in seen.trips] == [["HGET", "HGET"], ["HGETALL"]]


def test_machine_ids_of_no_keys_sends_nothing_and_bad_keys_fail_first(b: Backends) -> None:
    with sent(b.client) as seen:
        assert b.store.machine_ids([]) == {}
        with pytest.raises(InvalidConfigError):
            b.store.machine_ids(["ok", "bad\nkey"])
    assert seen.trips == []


# --- RedisInbox.count_expired / purge_expired -------------------------------------------


def test_count_expired_counts_what_a_purge_removes_and_writes_nothing(b: Backends) -> None:
    for i in range(5):
        claim(b, f"kept:{i}")
    expire(b, 7)
    before = namespace_state(b.client, b.store.prefix)
    with sent(b.client) as seen:
        assert b.inbox.count_expired() == 7
    assert namespace_state(b.client, b.store.prefix) == before
    # TIME, then one ZCOUNT per bucket in one pipeline: O(buckets * log N)
    assert [[c[0] for c in trip] for trip in seen.trips] == [["TIME"], ["ZCOUNT"] * 4]
    assert b.inbox.purge_expired(limit=None) == 7
    assert b.inbox.count_expired() == 0
    assert all(b.inbox.get("acct", f"kept:{i}", "k") for i in range(5))


def test_purge_expired_limit_caps_the_total_not_each_bucket(b: Backends) -> None:
    expire(b, 10)
    layout = layout_of(b.store)
    assert len({layout.bucket(f"gone:{i}") for i in range(10)}) > 1
    assert b.inbox.purge_expired(limit=3) == 3
    assert b.inbox.count_expired() == 7
    assert b.inbox.purge_expired(limit=5) == 5
    assert b.inbox.purge_expired(limit=5) == 2
    assert b.inbox.purge_expired() == 0


@pytest.mark.parametrize(("limit", "batch"), [(None, 2), (7, 2), (1, 1000), (26, 5)])
def test_purge_expired_round_trips_are_bounded(b: Backends, limit: int | None, batch: int) -> None:
    expire(b, 25)
    for i in range(10):
        claim(b, f"kept:{i}")
    with sent(b.client) as seen:
        removed = b.inbox.purge_expired(limit=limit, batch=batch)
    assert removed == (25 if limit is None else min(limit, 25))
    assert set(seen.names()) == {"PURGE_INBOX"}
    assert len(seen.trips) <= 4 + math.ceil(removed / batch) + 1  # buckets + batches + 1
    for trip in seen.trips:
        sizes = [int(c[-1]) for c in trip]
        assert max(sizes) <= batch and min(sizes) >= 1
    assert b.inbox.count_expired() == 25 - removed


@pytest.mark.parametrize(
    "kwargs", [{"limit": 0}, {"limit": -1}, {"limit": True}, {"limit": "5"}, {"batch": 0}]
)
def test_purge_expired_refuses_a_bad_limit_or_batch(b: Backends, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfigError):
        b.inbox.purge_expired(**kwargs)


# --- RedisInbox.count_for_instance / forget_instance ------------------------------------


@pytest.fixture
def rows(b: Backends) -> dict[str, int]:
    """Rows of ``order:1`` in three scopes (one expired), and of neighbours
    whose keys look alike or share its bucket."""
    for scope in ("", "acct", "acct*"):
        claim(b, "order:1", "k1", scope=scope)
    claim(b, "order:1", "k2", scope="acct")
    claim(b, "order:1", "old", scope="acct", lease=1)
    neighbours = ["order:10", "order:1x", "xorder:1", "order:*", *same_bucket(b, "order:1", 3)]
    for key in neighbours:
        claim(b, key, "k1")
    claim(b, "order:*", "k2", scope="")
    return {"order:1": 5, **dict.fromkeys(neighbours, 1), "order:*": 2}


def test_count_for_instance_counts_every_scope_and_writes_nothing(
    b: Backends, rows: dict[str, int]
) -> None:
    before = namespace_state(b.client, b.store.prefix)
    assert {k: b.inbox.count_for_instance(k) for k in rows} == rows
    assert b.inbox.count_for_instance("order:2") == 0
    assert namespace_state(b.client, b.store.prefix) == before


def test_forget_instance_deletes_its_rows_in_every_scope_and_nothing_else(
    b: Backends, rows: dict[str, int]
) -> None:
    assert b.inbox.forget_instance("order:1") == 5
    assert b.inbox.forget_instance("order:1") == 0
    assert b.inbox.get("acct", "order:1", "k1") is None and b.inbox.get("", "order:1", "k1") is None
    assert {k: b.inbox.count_for_instance(k) for k in rows} == {**rows, "order:1": 0}
    # the expiry index kept no member of the forgotten rows
    layout = layout_of(b.store)
    index = b.client.zrange(layout.inbox_expiry(layout.bucket("order:1")), 0, -1)
    assert not [m for m in index if f"{SEP}order:1{SEP}".encode() in m]
    # glob characters in a key are just characters
    assert b.inbox.forget_instance("order:*") == 2
    assert b.inbox.count_for_instance("order:10") == 1


def test_forget_instance_reads_one_bucket_then_deletes_in_one_round_trip(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in same_bucket(b, "order:1", 150):  # a hashtable-encoded index: ZSCAN pages
        claim(b, key)
    for i in range(40):
        claim(b, f"other:{i}")
    for i in range(4):
        claim(b, "order:1", f"k{i}", scope=f"s{i % 2}")
    monkeypatch.setattr(inbox_module, "PAGE", 20)
    layout = layout_of(b.store)
    index = layout.inbox_expiry(layout.bucket("order:1"))
    with sent(b.client) as counted:
        assert b.inbox.count_for_instance("order:1") == 4
    assert len(counted.trips) > 1 and set(counted.names()) == {"ZSCAN"}
    assert {c[1] for c in counted.commands("ZSCAN")} == {index}
    scans = len(counted.trips)
    with sent(b.client) as deleted:
        assert b.inbox.forget_instance("order:1") == 4
    assert len(deleted.trips) == scans + 1
    assert [c[0] for c in deleted.trips[-1]] == ["HDEL", "ZREM"] * 4
    with sent(b.client) as nothing:
        assert b.inbox.forget_instance("order:1") == 0
    assert set(nothing.names()) == {"ZSCAN"}


def test_instance_rows_refuse_a_bad_key(b: Backends) -> None:
    for method in (b.inbox.count_for_instance, b.inbox.forget_instance):
        with pytest.raises(InvalidConfigError):
            method("")


# --- RedisLog.streams_older_than / count_older_than / bucket_count -----------------------


@pytest.fixture
def logs(b: Backends) -> dict[str, list[int]]:
    """Streams by the timestamps of their records (seconds after BASE)."""
    found = {
        "old:1": [0, 1, 2, 50],
        "old:2": [5],
        "old:3": [1, 60, 2],  # out of order (skewed clocks): both old records go
        "new:1": [50, 51],
        **{f"old:more:{i}": [i % 7, 40] for i in range(9)},
    }
    for key, times in found.items():
        for s in times:
            b.log.append_next(key, entry(ts=BASE + s * 1000), version=1)
    return found


def cutoff() -> float:
    return (BASE + 30_000) / 1000


def test_streams_older_than_lists_streams_whose_oldest_record_is_older(
    b: Backends, logs: dict[str, list[int]]
) -> None:
    before = namespace_state(b.client, b.store.prefix)
    old = sorted(k for k in logs if k.startswith("old:"))
    assert sorted(b.log.streams_older_than(cutoff())) == old
    assert b.log.bucket_count() == 4
    per_bucket = [b.log.streams_older_than(cutoff(), bucket=n) for n in range(4)]
    assert sorted(k for keys in per_bucket for k in keys) == old
    layout = layout_of(b.store)
    assert all(layout.bucket(k) == n for n, keys in enumerate(per_bucket) for k in keys)
    assert b.log.streams_older_than(BASE / 1000) == []
    assert namespace_state(b.client, b.store.prefix) == before


@pytest.mark.parametrize("bucket", [4, -1, True, "0"])
def test_streams_older_than_refuses_a_bucket_out_of_range(
    b: Backends, logs: dict[str, list[int]], bucket: Any
) -> None:
    with pytest.raises(InvalidConfigError):
        b.log.streams_older_than(cutoff(), bucket=bucket)


def test_streams_older_than_costs_two_round_trips(
    b: Backends, logs: dict[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_module, "PAGE", 2)
    b.log.bucket_count()  # the schema marker is read once, before
    with sent(b.client) as seen:
        keys = b.log.streams_older_than(cutoff())
    assert len(keys) == 12
    counts, pages = seen.trips
    assert [c[0] for c in counts] == ["ZCOUNT"] * 4
    assert {c[0] for c in pages} == {"ZRANGE"} and len(pages) >= 6  # pages of 2 by rank
    with sent(b.client) as seen:
        assert b.log.bucket_count() == 4
    assert seen.trips == []


def test_count_older_than_is_what_purge_older_than_removes(
    b: Backends, logs: dict[str, list[int]]
) -> None:
    before = namespace_state(b.client, b.store.prefix)
    counted: list[tuple[str, int]] = []
    total = b.log.count_older_than(cutoff(), progress=lambda k, n: counted.append((k, n)))
    assert {k: b.log.count_older_than(cutoff(), key=k) for k in logs} == {
        k: sum(1 for s in times if s < 30) for k, times in logs.items()
    }
    # also the old record behind a newer one (clocks out of step): all of them go
    assert b.log.count_older_than(cutoff(), key="old:3") == 2
    assert namespace_state(b.client, b.store.prefix) == before
    removed: list[tuple[str, int]] = []
    assert b.log.purge_older_than(cutoff(), progress=lambda k, n: removed.append((k, n))) == total
    assert sorted(counted) == sorted(removed)
    assert total == sum(1 for times in logs.values() for s in times if s < 30)
    assert b.log.count_older_than(cutoff()) == 0


def test_count_older_than_reads_a_page_per_page_of_records_counted(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    for s in [*range(10), 40, 41]:
        b.log.append_next("long", entry(ts=BASE + s * 1000), version=1)
    monkeypatch.setattr(log_module, "PAGE", 3)
    b.log.bucket_count()
    with sent(b.client) as seen:
        assert b.log.count_older_than(cutoff(), key="long") == 10
    assert seen.names() == ["XRANGE"] * 5  # the whole stream: 3 + 3 + 3 + 3 + an empty page
    assert len(seen.trips) == 5
