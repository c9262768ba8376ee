"""WarmRecords: the bounded table of a store's last commits per key."""

from __future__ import annotations

import pytest

from django_xsm.redis.warm import WarmRecords, validate_warm_size


def _fields(size: int = 10) -> dict[bytes, bytes]:
    return {b"d": b"x" * size, b"v": b"1", b"u": b"1"}


def test_least_recently_used_keys_go_first():
    warm = WarmRecords(2)
    warm.put("a", _fields(), 1, "c1")
    warm.put("b", _fields(), 1, "c2")
    assert warm.get("a") is not None  # a is now the most recent
    warm.put("c", _fields(), 1, "c3")
    assert warm.get("b") is None
    assert [k for k in ("a", "c") if warm.get(k)] == ["a", "c"]


def test_the_byte_budget_bounds_the_snapshots_kept():
    warm = WarmRecords(100, max_bytes=1600)
    for i in range(20):
        warm.put(f"k{i}", _fields(100), 1, f"c{i}")
    assert warm.bytes <= 1600
    assert len(warm) == 16
    warm.put("k0", _fields(50), 1, "c")  # replacing counts the new size only
    assert warm.bytes == 15 * 100 + 50


def test_a_huge_snapshot_is_never_kept():
    warm = WarmRecords(100, max_bytes=1600)
    warm.put("big", _fields(101), 1, "c")
    assert warm.get("big") is None and warm.bytes == 0


def test_records_with_timer_bookkeeping_or_no_commit_id_are_never_kept():
    warm = WarmRecords(10)
    warm.put("a", {**_fields(), b"tf": b"{}"}, 1, "c")
    warm.put("b", _fields(), 1, "")
    assert warm.get("a") is None and warm.get("b") is None


def test_drop_and_clear_keep_the_byte_count():
    warm = WarmRecords(10)
    warm.put("a", _fields(10), 1, "c")
    warm.put("b", _fields(20), 1, "c")
    warm.drop("a")
    assert warm.bytes == 20
    warm.clear()
    assert warm.bytes == 0 and len(warm) == 0


@pytest.mark.parametrize("good", [0, 1, 10_000_000])
def test_sizes_in_range_are_accepted(good: int):
    assert validate_warm_size(good) == good
