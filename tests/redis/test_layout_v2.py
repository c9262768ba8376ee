"""Key layout 2: long snapshot-hash values in parts, floors only where a
record can vanish without a script, the root state answered by the machine
index; and the upgrade of a layout-1 namespace."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest

from django_xsm.exceptions import StoreError
from django_xsm.redis import LAYOUT_VERSION, RedisStore
from django_xsm.redis.keys import LONG_PART, LONG_PARTS
from tests.redis.helpers import layout_of, stored_value, unit
from tests.support import Backends, snap


def keys_of(store: Any, **filters: Any) -> list[str]:
    """Every key ``list_page`` lists with these filters, page by page."""
    out: list[str] = []
    cursor = ""
    while True:
        page, cursor = store.list_page("", after=cursor, limit=3, **filters)
        out += page
        if not cursor:
            return out


def sized(n: int) -> dict[str, Any]:
    """An order snapshot whose stored JSON grows with ``n``."""
    return snap(items=0, note="x" * n)


def test_snapshots_of_every_size_round_trip_whole_or_in_parts(b: Backends) -> None:
    name = layout_of(b.store).snapshot("order:1")
    version = 0
    sizes = [0, 1, 40, LONG_PART, LONG_PART + 1, 3 * LONG_PART, LONG_PART * LONG_PARTS, 5000, 10]
    for n in sizes:
        version = b.store.save("order:1", sized(n), expected_version=version)
        record = b.store.load("order:1")
        assert record is not None and record.snapshot["context"]["note"] == "x" * n
        stored = b.client.hgetall(name)
        data = stored_value(b.client, name, "d")
        assert data is not None
        parted = LONG_PART < len(data) <= LONG_PART * LONG_PARTS
        # exactly one form is stored, and no part of an earlier value is left
        assert (b"d" in stored) is not parted
        parts = {k for k in stored if k.startswith(b"d") and k[1:].isdigit()}
        count = int(stored[b"dn"]) if parted else 0
        assert parts == {f"d{i}".encode() for i in range(1, count + 1)}
        assert all(len(stored[p]) <= LONG_PART for p in parts)


def test_commit_ids_are_kept_in_parts_and_still_recognised(b: Backends) -> None:
    first = unit("order:1", 0, snap(), commit_id="c" * 40)
    b.store.commit(first)
    for v in range(1, 5):
        b.store.commit(unit("order:1", v, snap(items=v), commit_id=f"{v:040d}"))
    name = layout_of(b.store).snapshot("order:1")
    assert b"cid" not in b.client.hgetall(name)  # 5 ids of 40 bytes: in parts
    assert b.store.commit(first).replayed


def test_a_small_record_stays_a_listpack_on_a_real_server(b: Backends) -> None:
    if isinstance(b.client, fakeredis.FakeRedis):
        pytest.skip("fakeredis keeps no encodings")
    version = 0
    for i in range(10):  # 10 commit ids of 24 hex digits, a 200-byte snapshot
        version = b.store.commit(unit("order:1", version, sized(120 + i))).version
    name = layout_of(b.store).snapshot("order:1")
    # the compact encoding is "listpack" from Redis 7.0, "ziplist" before
    assert b.client.object("encoding", name) in (b"listpack", b"ziplist")


def test_a_whole_value_written_by_hand_wins_and_the_next_commit_replaces_it(b: Backends) -> None:
    b.store.save("order:1", sized(300), expected_version=0)
    name = layout_of(b.store).snapshot("order:1")
    b.client.hset(name, "d", b"{not json")  # next to the parts of the real one
    with pytest.raises(StoreError):
        b.store.load("order:1")
    assert b.store.save("order:1", sized(250), expected_version=1) == 2
    record = b.store.load("order:1")
    assert record is not None and record.snapshot["context"]["note"] == "x" * 250
    assert b"d" not in b.client.hgetall(name)


def test_versions_never_restart_without_a_floor_written_per_commit(b: Backends) -> None:
    layout = layout_of(b.store)
    floors = layout.floors(layout.bucket("order:1"))
    b.store.save("order:1", snap(), expected_version=0)
    b.store.save("order:1", snap(items=1), expected_version=1)
    assert b.client.hget(floors, "order:1") is None  # no ttl: nothing to remember yet
    b.store.delete("order:1")
    assert b.client.hget(floors, "order:1") == b"2"
    assert b.store.save("order:1", snap(), expected_version=0) == 3  # not 1 again
    b.store.forget("order:1")
    assert b.client.hget(floors, "order:1") == b"3"
    assert b.store.save("order:1", snap(), expected_version=0) == 4


def test_the_root_state_is_listed_through_the_machine_index(b: Backends) -> None:
    layout = layout_of(b.store)
    for i in range(6):
        b.store.commit(unit(f"order:{i}", 0, snap(), state_ids=("order", "order.cart")))
    # a machine whose root state is named otherwise keeps its root in sidx
    b.store.commit(unit("odd:1", 0, snap(), machine_id="odd", state_ids=("order", "order.cart")))
    b.store.commit(unit("odd:2", 0, snap(), machine_id="odd", state_ids=("odd2", "odd2.x")))
    sidx = [
        m for bk in range(layout.buckets) for m in b.client.zrange(layout.state_index(bk), 0, -1)
    ]
    assert not any(m.startswith(b"order\x00order:") for m in sidx)
    assert b"order\x00odd:1" in sidx
    everything = sorted([f"order:{i}" for i in range(6)] + ["odd:1"])
    assert keys_of(b.store, state="order") == everything
    assert keys_of(b.store, state="odd") == []  # machine odd, but no state odd
    assert keys_of(b.store, state="order", machine="odd") == ["odd:1"]
    assert keys_of(b.store, state="order", machine="order") == everything[1:]
    page, cursor, seen = [], "", []
    while True:
        page, cursor = b.store.list_page("", after=cursor, limit=2, state="order")
        seen += page
        if not cursor:
            break
    assert seen == everything
    b.store.delete("order:3")
    assert "order:3" not in keys_of(b.store, state="order")


def test_a_layout_1_namespace_is_refused_until_upgraded_and_then_reads(b: Backends) -> None:
    layout = layout_of(b.store)
    b.store.save("order:1", snap(items=7), expected_version=0)
    name, bk = layout.snapshot("order:1"), layout.bucket("order:1")
    # the record as layout 1 wrote it: the snapshot whole, the root state in sidx
    data = stored_value(b.client, name, "d")
    b.client.hdel(name, "dn", *(f"d{i}" for i in range(1, LONG_PARTS + 1)))
    b.client.hset(name, "d", data)
    b.client.zadd(layout.state_index(bk), {"order\x00order:1": 0})
    schema = "{" + b.store.prefix + "}:schema"
    b.client.hset(schema, "layout", 1)
    fresh = RedisStore(b.client, prefix=b.store.prefix)
    with pytest.raises(StoreError, match="layout 1") as err:
        fresh.load("order:1")
    assert "--upgrade-layout" in (err.value.hint or "")
    assert RedisStore(b.client, prefix=b.store.prefix).upgrade_layout() == (1, LAYOUT_VERSION)
    assert RedisStore(b.client, prefix=b.store.prefix).upgrade_layout() == (2, 2)
    upgraded = RedisStore(b.client, prefix=b.store.prefix)
    record = upgraded.load("order:1")
    assert record is not None and record.snapshot["context"]["items"] == 7
    assert keys_of(upgraded, state="order") == ["order:1"]  # in both indexes, once
    assert upgraded.save("order:1", snap(items=8), expected_version=1) == 2
    assert b"d" not in b.client.hgetall(name)  # rewritten in parts


def test_upgrade_never_moves_a_newer_layout_back(b: Backends) -> None:
    b.store.load("k")
    schema = "{" + b.store.prefix + "}:schema"
    b.client.hset(schema, "layout", LAYOUT_VERSION + 1)
    with pytest.raises(StoreError, match="upgrade django-xsm"):
        RedisStore(b.client, prefix=b.store.prefix).upgrade_layout()
    assert b.client.hget(schema, "layout") == str(LAYOUT_VERSION + 1).encode()


def test_upgrade_of_a_namespace_that_does_not_exist_creates_nothing(b: Backends) -> None:
    store = RedisStore(b.client, prefix=b.store.prefix + "x")
    assert store.upgrade_layout() == (0, 0)
    assert b.client.exists("{" + b.store.prefix + "x}:schema") == 0
