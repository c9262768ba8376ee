"""The COMMIT script called directly: its replies, and every refusal
(stale version, create over an existing record, foreign lock, lost claim,
foreign key type, damaged version) leaving the namespace byte-identical."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from django_xsm.exceptions import ConflictError, SnapshotCorruptError, StoreError
from django_xsm.persistence.records import (
    ClaimRequest,
    InboxMark,
    InboxRelease,
    OpenRequest,
)
from django_xsm.redis import calls
from tests.redis.helpers import (
    entry,
    layout_of,
    namespace_state,
    raw_script,
    snap,
    unit,
)
from tests.support import Backends


def claim_req(
    idem: str = "k1", *, owner: str = "o1", fp: str = "fp", key: str = "order:1", lease: int = 5_000
) -> ClaimRequest:
    return ClaimRequest("acct", key, idem, fp, owner, lease)


def s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


# --- commit ---------------------------------------------------------------------------


def _full_unit(b: Backends, expected: int, **kw: Any) -> Any:
    c = kw.pop("claim", claim_req())
    return unit(
        "order:1",
        expected,
        snap(items=9),
        state_ids=("order", "order.cart"),
        next_due_ms=1_900_000_000_000,
        timer_failures=kw.pop("timer_failures", {}),
        marks=(InboxMark(c, {"ok": 1}, 60_000),),
        releases=(InboxRelease(claim_req("k2")),),
        log_entries=(entry(), entry("PAY")),
        **kw,
    )


def _commit_raw(b: Backends, u: Any, ttl_ms: int = 0) -> list[Any]:
    call = calls.commit_call(layout_of(b.store), u, b"{}", ttl_ms=ttl_ms, log_maxlen=0)
    return raw_script(b.client, "COMMIT")(keys=call.keys, args=call.args)  # type: ignore[no-any-return]


def _prepared(b: Backends) -> None:
    """A namespace with something in every kind of key of order:1."""
    b.inbox.claim(claim_req())
    b.inbox.claim(claim_req("k2"))
    b.store.commit(_full_unit(b, 0, claim=claim_req("k3")), inbox=b.inbox, log=b.log)
    b.inbox.claim(claim_req())


def test_commit_replies_ok_dup_conflict_lock_claim(b: Backends) -> None:
    b.inbox.claim(claim_req())
    u = _full_unit(b, 0)
    status, version, first, now, failures = _commit_raw(b, u)
    assert (s(status), version, first) == ("ok", 1, 1) and now > 1_600_000_000_000
    assert failures is None  # the timer bookkeeping as stored now: none
    status, version, zero, updated = _commit_raw(b, u)
    assert (s(status), version, zero, updated) == ("dup", 1, 0, now)
    assert [s(x) for x in _commit_raw(b, _full_unit(b, 5))] == ["conflict", "1"]
    assert [s(x) for x in _commit_raw(b, _full_unit(b, 0))] == ["conflict", "1"]
    assert [s(x) for x in _commit_raw(b, unit("absent", 2, snap()))] == ["conflict", "-1"]
    b.store.acquire_lock("order:1", "holder", 5_000)
    assert [s(x) for x in _commit_raw(b, _full_unit(b, 1))] == ["lock", "1"]
    b.store.release_lock("order:1", "holder")
    assert [s(x) for x in _commit_raw(b, _full_unit(b, 1, lock_token="gone"))] == ["lock", "1"]
    b.inbox.claim(claim_req("k9", owner="thief"))
    stolen = _full_unit(b, 1, claim=claim_req("k9"))
    assert [s(x) for x in _commit_raw(b, stolen)] == ["claim", "1"]


def test_commit_replies_the_timer_bookkeeping_it_leaves(b: Backends) -> None:
    from django_xsm.persistence.records import TimerFailure

    b.inbox.claim(claim_req())
    failing = {"0:xstate.after.1000": TimerFailure(2, 1_900_000_000_000)}
    reply = _commit_raw(b, _full_unit(b, 0, timer_failures=failing))
    assert json.loads(reply[4])["0:xstate.after.1000"]["attempts"] == 2
    b.inbox.claim(claim_req("k5"))
    kept = _commit_raw(b, _full_unit(b, 1, claim=claim_req("k5"), timer_failures=None))
    assert json.loads(kept[4])["0:xstate.after.1000"]["attempts"] == 2  # unchanged, as stored


@pytest.mark.parametrize(
    "make_unit",
    [
        pytest.param(lambda b: _full_unit(b, 7), id="stale-version"),
        pytest.param(lambda b: _full_unit(b, 0), id="create-over-existing"),
        pytest.param(lambda b: _full_unit(b, 1, lock_token="nope"), id="lock-not-held"),
        pytest.param(lambda b: _full_unit(b, 1, claim=claim_req("k9")), id="lost-claim"),
    ],
)
def test_a_refused_commit_leaves_every_key_byte_identical(b: Backends, make_unit: Any) -> None:
    _prepared(b)
    b.inbox.claim(claim_req("k9", owner="thief"))
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(ConflictError):
        b.store.commit(make_unit(b), inbox=b.inbox, log=b.log)
    assert namespace_state(b.client, b.store.prefix) == before


def test_a_commit_under_a_foreign_lock_leaves_every_key_byte_identical(b: Backends) -> None:
    _prepared(b)
    b.store.acquire_lock("order:1", "foreign", 60_000)
    before = namespace_state(b.client, b.store.prefix)
    for token in ("", "mine"):
        with pytest.raises(ConflictError) as err:
            b.store.commit(_full_unit(b, 1, lock_token=token), inbox=b.inbox, log=b.log)
        assert err.value.reason == "lock"
    assert namespace_state(b.client, b.store.prefix) == before


@pytest.mark.parametrize("kind", ["log", "lock", "inbox"])
def test_a_foreign_type_at_an_instance_key_fails_the_commit_before_any_write(
    b: Backends, kind: str
) -> None:
    _prepared(b)
    layout = layout_of(b.store)
    name = {
        "log": layout.log("order:1"),
        "lock": layout.lock("order:1"),
        "inbox": layout.inbox("acct", "order:1"),
    }[kind]
    b.client.delete(name)
    b.client.rpush(name, "foreign")
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(SnapshotCorruptError):
        b.store.commit(_full_unit(b, 1), inbox=b.inbox, log=b.log)
    assert namespace_state(b.client, b.store.prefix) == before


def test_a_damaged_version_field_is_snapshot_corrupt_not_a_crash(b: Backends) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    b.client.hset(layout_of(b.store).snapshot("order:1"), "v", "garbage")
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(SnapshotCorruptError):
        b.store.load("order:1")
    with pytest.raises(SnapshotCorruptError):
        b.store.commit(unit("order:1", 1, snap(items=1)))
    assert namespace_state(b.client, b.store.prefix) == before


def test_a_commit_retried_with_the_same_id_is_replayed_not_reapplied(b: Backends) -> None:
    b.inbox.claim(claim_req())
    u = _full_unit(b, 0)
    first = b.store.commit(u, inbox=b.inbox, log=b.log)
    after_first = namespace_state(b.client, b.store.prefix)
    again = b.store.commit(u, inbox=b.inbox, log=b.log)
    assert again.replayed and again.version == first.version == 1
    assert again.updated_ms == first.updated_ms
    assert namespace_state(b.client, b.store.prefix) == after_first
    assert [r.seq for r in b.log.read("order:1")] == [1, 2]


def test_a_commit_without_snapshot_on_an_absent_key_creates_no_record(b: Backends) -> None:
    """Marks and log records alone must not leave a half record behind."""
    c = claim_req()
    b.inbox.claim(c)
    u = unit(
        "order:1",
        0,
        None,
        marks=(InboxMark(c, {"refused": True}, 60_000),),
        log_entries=(entry("NOPE", accepted=False),),
        timer_failures={},
    )
    result = b.store.commit(u, inbox=b.inbox, log=b.log)
    assert result.version == 0
    assert b.store.load("order:1") is None
    assert list(b.store.list_keys()) == []
    assert b.inbox.get("acct", "order:1", "k1")["state"] == "done"
    assert b.store.save("order:1", snap(), expected_version=0) == 1


def test_open_with_a_lock_ttl_of_zero_is_refused_before_any_write(b: Backends) -> None:
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises((StoreError, ValueError)):
        b.store.open(OpenRequest("order:1", "tok", 0, (claim_req(),)), inbox=b.inbox)
    assert namespace_state(b.client, b.store.prefix) == before


def _with_header(call: Any, edit: Any) -> list[Any]:
    """The COMMIT call's arguments with its JSON document edited by ``edit``
    (bypassing the client-side checks, as another client or a bug could)."""
    doc = json.loads(call.args[1])
    edit(doc)
    return [call.args[0], json.dumps(doc)]


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        pytest.param("[18][2][3]", lambda d: d[17][1].__setitem__(2, None), id="null-actor"),
        pytest.param("[18][1][3]", lambda d: d[17][0].__setitem__(2, True), id="bool-actor"),
        pytest.param("[18][1][8]", lambda d: d[17][0].__setitem__(7, []), id="list-correlation"),
        pytest.param("[18][1][9]", lambda d: d[17][0].__setitem__(8, "x"), id="text-timestamp"),
        pytest.param("[16][1][5]", lambda d: d[15][0].__setitem__(4, None), id="null-receipt"),
        pytest.param("[16][1][1]", lambda d: d[15][0].__setitem__(0, 2), id="mark-not-inbox"),
        pytest.param("[17][1][3]", lambda d: d[16][0].__setitem__(2, 7), id="number-owner"),
        pytest.param("[10]", lambda d: d.__setitem__(9, ["order", None]), id="null-state-id"),
        pytest.param("[8]", lambda d: d.__setitem__(7, None), id="null-machine"),
        pytest.param("[18]", lambda d: d.__setitem__(17, "entries"), id="entries-not-a-list"),
        pytest.param("[15]", lambda d: d.__setitem__(14, 10**17), id="log-cap-past-xadd"),
        pytest.param("[15]", lambda d: d.__setitem__(14, 2.5), id="fractional-log-cap"),
        pytest.param("[15]", lambda d: d.__setitem__(14, -1), id="negative-log-cap"),
    ],
)
def test_a_wrong_argument_type_fails_the_commit_before_any_write(
    b: Backends, where: str, edit: Any
) -> None:
    """Redis keeps the writes a script made before it failed: the COMMIT
    script checks every argument's type first, so a null actor (which
    XADD refuses) can no longer leave a saved snapshot without its log."""
    _prepared(b)
    b.inbox.claim(claim_req("k4"))
    u = _full_unit(b, 1, claim=claim_req("k4"))
    call = calls.commit_call(layout_of(b.store), u, b"{}", ttl_ms=0, log_maxlen=0)
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(redis.exceptions.ResponseError) as err:
        raw_script(b.client, "COMMIT")(keys=call.keys, args=_with_header(call, edit))
    assert f"COMMIT argument {where}" in str(err.value)
    assert namespace_state(b.client, b.store.prefix) == before
