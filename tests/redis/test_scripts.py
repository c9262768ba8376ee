"""Every Lua script called directly with the KEYS/ARGV of its header.

Replies must match the documented shape, and every script must do all its
checks before its first write: a refused call leaves the namespace
byte-identical (hashes, sorted sets, streams, strings and TTLs compared).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from django_xsm.exceptions import SnapshotCorruptError
from django_xsm.persistence.outbox import Emitted
from django_xsm.persistence.records import (
    ClaimRequest,
    InboxMark,
    InboxRelease,
    OpenRequest,
    TimerFailure,
)
from django_xsm.redis import LAYOUT_VERSION, calls
from django_xsm.redis.keys import LOCK_WAKE_MS, SEP
from tests.redis.helpers import (
    entry,
    layout_of,
    namespace_state,
    raw_script,
    snap,
    stored_value,
    unit,
)
from tests.support import Backends


def claim_req(
    idem: str = "k1", *, owner: str = "o1", fp: str = "fp", key: str = "order:1", lease: int = 5_000
) -> ClaimRequest:
    return ClaimRequest("acct", key, idem, fp, owner, lease)


def s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


# --- headers ---------------------------------------------------------------------


def test_commit_call_builds_the_documented_keys_and_argv(b: Backends) -> None:
    layout = layout_of(b.store)
    c = claim_req()
    u = unit(
        "order:1",
        3,
        snap(),
        floor=2,
        state_ids=("order", "order.cart"),
        next_due_ms=123,
        timer_failures={"x": TimerFailure(1, 5, dead=True)},
        lock_token="tok",
        release_lock=True,
        marks=(InboxMark(c, {"ok": 1}, 60_000),),
        releases=(InboxRelease(claim_req("k2")),),
        log_entries=(entry(), entry("PAY")),
        emitted=(Emitted("cid-0", {"type": "order.paid", "amount": 1}),),
    )
    call = calls.commit_call(layout, u, b"DATA", ttl_ms=9, log_maxlen=7)
    bk = layout.bucket("order:1")
    assert call.script == "COMMIT"
    assert call.keys == [
        layout.snapshot("order:1"),
        layout.lock("order:1"),
        layout.floors(bk),
        *layout.index_keys(bk),
        layout.log("order:1"),
        layout.log_index(bk),
        layout.inbox_expiry(bk),
        layout.outbox(bk),
        layout.lock_waiters("order:1"),
        layout.lock_wake("order:1"),
        layout.inbox("acct", "order:1"),
    ]
    data, header = call.args
    assert data == b"DATA"
    h = json.loads(header)
    assert h[:15] == [
        "order:1",
        u.commit_id,
        3,
        2,
        "tok",
        1,
        1,
        "order",
        "",
        ["order", "order.cart"],
        123,
        json.dumps({"x": TimerFailure(1, 5, dead=True).to_dict()}, separators=(",", ":")),
        1,
        9,
        7,
    ]
    field = layout.inbox_field("order:1", "k1")
    # KEYS[17] is the inbox
    assert h[15] == [[17, field, "fp", "o1", '{"ok":1}', 60_000]]
    assert h[16] == [[17, layout.inbox_field("order:1", "k2"), "o1"]]
    assert [e[0] for e in h[17]] == ["ADD", "PAY"]
    assert h[18] == [["cid-0", '{"type":"order.paid","amount":1}']]
    assert len(h) == 19


def test_every_script_of_the_module_has_a_header() -> None:
    import inspect

    from django_xsm.redis import scripts
    from django_xsm.redis.scripts import inbox, indexes, log, outbox, records, rewrite

    lines = [
        line
        for module in (records, inbox, indexes, log, outbox, rewrite)
        for line in inspect.getsource(module).splitlines()
    ]
    for name in scripts.__all__:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
        head = []
        for line in reversed(lines[:at]):
            if not line.startswith("#"):
                break
            head.append(line)
        text = "\n".join(head)
        assert "KEYS[1" in text, f"{name}: no KEYS in its header"
        assert "return" in text, f"{name}: no 'returns' in its header"


# --- schema, locks ------------------------------------------------------------------


def test_schema_creates_the_marker_once_and_returns_what_is_stored(b: Backends) -> None:
    schema = raw_script(b.client, "SCHEMA")
    key = "{" + b.store.prefix + "}:schema"
    layout_of(b.store)  # the store's first use wrote the marker, with an id
    layout, buckets, ns_id = schema(keys=[key], args=[LAYOUT_VERSION, 99, "other"])
    assert [s(layout), s(buckets)] == [str(LAYOUT_VERSION), "4"]
    assert s(ns_id) == b.store.core.state.namespace_id != "other"  # kept, never replaced
    fresh = "{" + b.store.prefix + "x}:schema"
    try:
        assert [s(x) for x in schema(keys=[fresh], args=[1, 8, "id1"])] == ["1", "8", "id1"]
        assert [s(x) for x in schema(keys=[fresh], args=[1, 16, "id2"])] == ["1", "8", "id1"]
    finally:
        b.client.delete(fresh)


def test_acquire_and_release_lock_replies(b: Backends) -> None:
    keys = layout_of(b.store).lock_keys("k")
    lock, waiters, wake = keys
    acquire, release = raw_script(b.client, "ACQUIRE_LOCK"), raw_script(b.client, "RELEASE_LOCK")
    assert acquire(keys=keys[:2], args=["a", 5_000]) == 0
    assert acquire(keys=keys[:2], args=["a", 5_000]) == 0  # re-entrant, renews
    assert b.client.exists(waiters) == 0  # nobody waited yet
    assert release(keys=keys, args=["a"]) == 1
    assert b.client.exists(wake) == 0  # a release with no waiter pushes nothing
    assert acquire(keys=keys[:2], args=["a", 5_000]) == 0
    assert 0 < acquire(keys=keys[:2], args=["b", 5_000]) <= 5_000
    assert 0 < b.client.pttl(waiters) <= LOCK_WAKE_MS  # b flagged that it waits
    assert release(keys=keys, args=["b"]) == 0
    assert b.client.exists(wake) == 0  # not a release: no wake-up
    assert release(keys=keys, args=["a"]) == 1
    assert b.client.exists(lock) == 0
    assert b.client.lrange(wake, 0, -1) == [b"1"]  # one wake-up for the waiter
    assert 0 < b.client.pttl(wake) <= LOCK_WAKE_MS


# --- inbox scripts -------------------------------------------------------------------


def _inbox_keys(b: Backends, key: str = "order:1") -> tuple[list[str], str]:
    layout = layout_of(b.store)
    return (
        [layout.inbox("acct", key), layout.inbox_expiry(layout.bucket(key))],
        layout.inbox_field(key, "k1"),
    )


def test_claim_mark_release_replies(b: Backends) -> None:
    keys, field = _inbox_keys(b)
    claim, mark, rel = (raw_script(b.client, n) for n in ("CLAIM", "MARK", "RELEASE"))
    assert [s(x) for x in claim(keys=keys, args=[field, "fp", "a", 5_000])] == ["claimed", "", "0"]
    st, receipt, retry = claim(keys=keys, args=[field, "fp", "b", 5_000])
    assert (s(st), s(receipt)) == ("in_flight", "") and 0 < int(retry) <= 5_000
    assert s(claim(keys=keys, args=[field, "zz", "b", 5_000])[0]) == "mismatch"
    assert mark(keys=keys, args=[field, "fp", "b", '{"r":1}', 60_000]) == 0  # not b's claim
    assert rel(keys=keys, args=[field, "b"]) == 0
    assert mark(keys=keys, args=[field, "fp", "a", '{"r":1}', 60_000]) == 1
    assert [s(x) for x in claim(keys=keys, args=[field, "fp", "c", 5_000])] == [
        "done",
        '{"r":1}',
        "0",
    ]
    assert rel(keys=keys, args=[field, "a"]) == 0  # finished rows stay
    row = json.loads(b.client.hget(keys[0], field))
    assert row["s"] == "d" and row["o"] == "a" and int(row["x"]) > 0
    assert b.client.zscore(keys[1], keys[0] + SEP + field) == int(row["x"])


def test_purge_inbox_and_forget_scope_replies(b: Backends) -> None:
    keys, field = _inbox_keys(b)
    claim = raw_script(b.client, "CLAIM")
    claim(keys=keys, args=[field, "fp", "a", 1])
    claim(keys=keys, args=[field + "2", "fp", "a", 60_000])
    b.pass_time(5)
    assert raw_script(b.client, "PURGE_INBOX")(keys=[keys[1]], args=[100]) == 1
    assert b.client.hkeys(keys[0]) == [(field + "2").encode()]
    assert raw_script(b.client, "FORGET_SCOPE")(keys=keys, args=[]) == 1
    assert b.client.exists(keys[0]) == 0 and b.client.zcard(keys[1]) == 0


# --- open --------------------------------------------------------------------------------


def _open_keys(b: Backends, key: str = "order:1") -> list[str]:
    layout = layout_of(b.store)
    return [
        layout.snapshot(key),
        layout.lock(key),
        layout.floors(layout.bucket(key)),
        layout.lock_waiters(key),
    ]


def test_open_replies(b: Backends) -> None:
    b.store.save("order:1", snap(items=2), expected_version=0)
    keys, field = _inbox_keys(b)
    open_ = raw_script(b.client, "OPEN")
    reply = open_(
        keys=_open_keys(b) + keys,
        args=["order:1", "tok", 5_000, 1, 2**20, field, "fp", "me", 5_000],
    )
    busy, floor, claims, values, locked, exists, size, held = reply
    assert size == held == 0  # a locked open: "held by another" is for unlocked ones
    assert (busy, floor, locked, exists) == (0, 1, 1, 1)
    assert [[s(x) for x in c] for c in claims] == [["claimed", "", "0"]]
    d, v, mv, m, u, tf = values  # HMGET d v mv m u tf
    assert (v, mv, m, tf) == (b"1", b"", b"order", None) and d.startswith(b"{") and int(u) > 0
    busy_reply = open_(keys=_open_keys(b), args=["order:1", "other", 5_000, 0, 2**20])
    assert busy_reply[0] > 0 and busy_reply[1:] == [0, [], [], 0, 0, 0]
    assert b.client.exists(_open_keys(b)[3]) == 1  # "other" waits: flagged
    # an unlocked open reads the record and says how long "tok" still holds it
    unlocked = open_(keys=_open_keys(b), args=["order:1", "", 0, 0, 2**20])
    assert unlocked[0] == 0 and unlocked[4] == 0 and 0 < unlocked[7] <= 5_000
    release_lock = raw_script(b.client, "RELEASE_LOCK")
    release_lock(keys=layout_of(b.store).lock_keys("order:1"), args=["tok"])
    # a snapshot over the limit comes back as its size, not its bytes
    big = open_(keys=_open_keys(b), args=["order:1", "", 0, 0, 3])
    stored = stored_value(b.client, _open_keys(b)[0], "d")
    assert big[:6] == [0, 0, [], [], 0, 1] and stored is not None and big[6] == len(stored)


def test_open_with_a_busy_lock_or_a_claim_in_flight_writes_nothing(b: Backends) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    b.store.acquire_lock("order:1", "holder", 5_000)
    b.inbox.claim(claim_req("k0", owner="other"))
    before = namespace_state(b.client, b.store.prefix)
    res = b.store.open(OpenRequest("order:1", "tok", 5_000, (claim_req(),)), inbox=b.inbox)
    assert res.lock_busy_ms > 0
    # only the waiters flag, so that the holder's release wakes this caller
    after = namespace_state(b.client, b.store.prefix)
    flag = layout_of(b.store).lock_waiters("order:1").encode()
    assert after.pop(flag)[:2] == ("string", b"1")
    assert after == before
    b.store.release_lock("order:1", "holder")
    before = namespace_state(b.client, b.store.prefix)
    res = b.store.open(
        OpenRequest("order:1", "tok", 5_000, (claim_req(), claim_req("k0"))), inbox=b.inbox
    )
    assert not res.locked and [c.status for c in res.claims] == ["claimed", "in_flight"]
    assert namespace_state(b.client, b.store.prefix) == before


def test_open_on_a_wrong_type_snapshot_raises_and_writes_nothing(b: Backends) -> None:
    layout = layout_of(b.store)
    b.client.set(layout.snapshot("order:1"), "not a hash")
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(SnapshotCorruptError):
        b.store.open(OpenRequest("order:1", "tok", 5_000, (claim_req(),)), inbox=b.inbox)
    assert namespace_state(b.client, b.store.prefix) == before


# --- removal, listing, timers, log ------------------------------------------------


def test_delete_and_forget_replies(b: Backends) -> None:
    layout = layout_of(b.store)
    b.inbox.claim(claim_req())
    b.store.commit(
        unit(
            "order:1",
            0,
            snap(),
            next_due_ms=1_900_000_000_000,
            marks=(InboxMark(claim_req(), {"ok": 1}, 60_000),),
            log_entries=(entry(), entry("PAY")),
        ),
        inbox=b.inbox,
        log=b.log,
    )
    bk = layout.bucket("order:1")
    delete_keys = [layout.snapshot("order:1"), layout.floors(bk), *layout.index_keys(bk)]
    forget_keys = [
        *delete_keys,
        layout.lock("order:1"),
        layout.log("order:1"),
        layout.log_index(bk),
    ]
    b.store.acquire_lock("order:1", "tok", 5_000)
    assert raw_script(b.client, "DELETE")(keys=delete_keys, args=["order:1"]) == 1
    assert raw_script(b.client, "DELETE")(keys=delete_keys, args=["order:1"]) == 0
    assert b.client.hget(layout.floors(bk), "order:1") == b"1"
    assert raw_script(b.client, "FORGET")(keys=forget_keys, args=["order:1"]) == [0, 0, 1, 2]
    assert b.client.exists(layout.log("order:1"), layout.lock("order:1")) == 0
    assert b.client.zscore(layout.log_index(bk), "order:1") is None


def test_due_list_page_prune_and_timer_failure_replies(b: Backends) -> None:
    layout = layout_of(b.store)
    b.store.commit(unit("t", 0, snap(), next_due_ms=1_000, state_ids=("order", "order.cart")))
    bk = layout.bucket("t")
    pk, sp, lp = layout.prune_keys(bk), layout.snapshot_prefix(bk), layout.log_prefix(bk)
    assert pk == [*layout.index_keys(bk), layout.log_index(bk)]
    assert sp + "t" == layout.snapshot("t") and lp + "t" == layout.log("t")
    assert raw_script(b.client, "DUE")(keys=pk, args=[5_000, 10, sp, lp]) == [b"t", b"1000"]
    assert raw_script(b.client, "DUE")(keys=pk, args=[999, 10, sp, lp]) == []
    page = raw_script(b.client, "LIST_PAGE")
    assert page(keys=pk, args=[2, "[", "[\xff", 10, 0, sp, lp, "0", ""]) == [b"t"]
    head = "order.cart" + SEP
    assert page(keys=pk, args=[4, "[" + head, "[" + head + "\xff", 10, len(head), sp, lp]) == [b"t"]
    by_state = [4, "[" + head, "[" + head + "\xff", 10, len(head), sp, lp]
    assert page(keys=pk, args=[*by_state, "1", "order"]) == [b"t"]
    assert page(keys=pk, args=[*by_state, "1", "other"]) == []
    assert b.store.list_page(state="order.cart", machine="other") == ([], "")
    assert b.store.list_page(state="order.cart", machine="order") == (["t"], "")
    assert raw_script(b.client, "PRUNE_EXPIRED")(keys=pk, args=[10, sp, lp]) == 0
    rtf = raw_script(b.client, "RECORD_TIMER_FAILURE")
    tf_keys = [layout.snapshot("t"), layout.due(bk), layout.dead(bk)]
    fail = json.dumps({"e": TimerFailure(3, 0, dead=True).to_dict()})
    assert rtf(keys=tf_keys, args=["t", 2, fail, "", "1"]) == 0
    assert rtf(keys=tf_keys, args=["t", 1, fail, "", "1"]) == 1
    assert b.client.zcard(layout.due(bk)) == 0 and b.client.zcard(layout.dead(bk)) == 1


def test_log_append_and_purge_replies(b: Backends) -> None:
    layout = layout_of(b.store)
    keys = [layout.log("k"), layout.log_index(layout.bucket("k"))]
    append = raw_script(b.client, "LOG_APPEND")
    e = calls.entry_args(entry(ts=1_000))
    assert append(keys=keys, args=["k", 0, 0, 1, *e]) == 1
    assert append(keys=keys, args=["k", 5, 0, 1, *e]) == 5
    assert append(keys=keys, args=["k", 5, 0, 1, *e]) == -1
    assert append(keys=keys, args=["k", 0, 0, 2, *calls.entry_args(entry(ts=9_000))]) == 6
    purge = raw_script(b.client, "LOG_PURGE")
    assert purge(keys=keys, args=["k", 5_000, 1, "-", ""]) == [1, 1, b"(1-0", b""]
    assert purge(keys=keys, args=["k", 5_000, 10, "-", ""]) == [1, 0, b"", b""]
    assert b.client.zscore(keys[1], "k") == 9_000
    assert append(keys=keys, args=["k", 0, 0, 2, *e]) == 7
