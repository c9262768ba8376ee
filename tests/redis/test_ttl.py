"""``ttl_s``: idle instances expire by the server clock, and no dead key
stays behind in ``list_keys()``, ``due_keys()`` or any index once a prune
path (DUE, LIST_PAGE, PRUNE_EXPIRED) has met it."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_xsm.persistence.records import ClaimRequest, InboxMark, TimerFailure
from tests.redis.helpers import entry, layout_of, snap, unit
from tests.redis.servers import wait_until
from tests.support import Backends

pytestmark = pytest.mark.timeout(60)

# Long enough that populating six instances on a loaded machine (CI runs
# legs beside other work) ends before the first one expires.
TTL_S = 1.0
KEYS = [f"order:{i}" for i in range(6)]


def populate(b: Backends, *, due: bool = True, dead: bool = False) -> None:
    for k in KEYS:
        c = ClaimRequest("acct", k, "idem", "fp", "w", 5_000)
        b.inbox.claim(c)
        b.store.commit(
            unit(
                k,
                0,
                snap(),
                state_ids=("order", "order.cart"),
                next_due_ms=5 if due else None,
                marks=(InboxMark(c, {"ok": 1}, 60_000),),
                log_entries=(entry(),),
            ),
            inbox=b.inbox,
            log=b.log,
        )
        if dead:
            b.store.record_timer_failure(
                k,
                expected_version=1,
                failures={"e": TimerFailure(9, 0, dead=True)},
                next_due_ms=5 if due else None,
            )


def wait_expired(b: Backends, keys: list[str] = KEYS) -> None:
    layout = layout_of(b.store)
    names = [layout.snapshot(k) for k in keys]
    wait_until(lambda: b.client.exists(*names) == 0, timeout=5, what="snapshots to expire")


def prune_all(b: Backends) -> int:
    """``prune_expired()`` until every key of ``KEYS`` was pruned; how many
    it pruned in all. A snapshot can be gone a few ms before its expiry
    index entry is due (the snapshot's expiry and the index's score come
    from clocks a few ms apart on a loaded machine), so one pass may miss
    a key the next one finds."""
    pruned = [b.store.prune_expired()]
    wait_until(
        lambda: pruned.append(b.store.prune_expired()) or sum(pruned) >= len(KEYS),
        timeout=5,
        what="every expired key to be pruned",
    )
    return sum(pruned)


def indexed(b: Backends) -> dict[str, set[str]]:
    """Every instance key each per-bucket index still mentions."""
    layout = layout_of(b.store)
    out: dict[str, set[str]] = {}
    for bk in range(layout.buckets):
        names = dict(
            zip(
                ["ix", "idx", "midx", "sidx", "due", "dead", "exp"],
                layout.index_keys(bk),
                strict=True,
            )
        )
        names["lidx"] = layout.log_index(bk)
        for label, name in names.items():
            if label == "ix":
                members = [m.decode() for m in b.client.hkeys(name)]
            else:
                members = [m.decode() for m in b.client.zrange(name, 0, -1)]
            if label in ("midx", "sidx"):
                members = [m.split("\x00", 1)[1] for m in members]
            out.setdefault(label, set()).update(members)
    return out


def assert_no_dead_keys(b: Backends, labels: Any = None) -> None:
    found = indexed(b)
    for label in labels or found:
        assert not (found[label] & set(KEYS)), f"dead keys left in {label}: {found[label]}"


def test_idle_instances_expire_with_their_log(make: Any) -> None:
    b = make(ttl_s=TTL_S)
    populate(b)
    layout = layout_of(b.store)
    ttl = b.client.pttl(layout.snapshot(KEYS[0]))
    assert 0 < ttl <= TTL_S * 1000
    assert 0 < b.client.pttl(layout.log(KEYS[0])) <= TTL_S * 1000
    wait_expired(b)
    assert all(b.store.load(k) is None for k in KEYS)
    assert b.log.read(KEYS[0]) == []


def test_due_keys_prunes_expired_instances_from_every_index(make: Any) -> None:
    b = make(ttl_s=TTL_S)
    populate(b, dead=True)
    wait_expired(b)
    assert b.store.due_keys(10) == []
    assert_no_dead_keys(b, ["ix", "idx", "midx", "sidx", "due", "dead", "exp"])


def test_list_keys_prunes_expired_instances_from_every_index(make: Any) -> None:
    b = make(ttl_s=TTL_S)
    populate(b, due=False, dead=True)
    wait_expired(b)
    assert list(b.store.list_keys()) == []
    assert_no_dead_keys(b, ["ix", "idx", "midx", "sidx", "due", "dead", "exp"])


@pytest.mark.parametrize("how", ["machine", "state"])
def test_filtered_listing_prunes_expired_instances(make: Any, how: str) -> None:
    b = make(ttl_s=TTL_S)
    populate(b, due=False)
    wait_expired(b)
    kwargs = {"machine": "order"} if how == "machine" else {"state": "order.cart"}
    assert b.store.list_page(**kwargs) == ([], "")
    assert_no_dead_keys(b, ["ix", "idx", "midx", "sidx", "exp"])


def test_prune_expired_removes_every_trace_from_the_indexes(make: Any) -> None:
    b = make(ttl_s=TTL_S)
    populate(b, dead=True)
    wait_expired(b)
    assert prune_all(b) == len(KEYS)
    assert b.store.prune_expired() == 0
    assert_no_dead_keys(b)
    assert b.store.dead_letters() == []
    assert list(b.store.list_keys()) == [] and b.store.due_keys(10) == []


def test_an_instance_scored_due_too_early_is_pruned_when_it_expires(make: Any) -> None:
    """Clocks can disagree by a few ms (the script's TIME, the expiry's
    own clock, a promoted replica's): a live instance its expiry index
    calls due is scored again, not dropped from the index for good."""
    b = make(ttl_s=TTL_S * 2)
    populate(b, dead=True)
    layout = layout_of(b.store)
    early = layout.index_keys(layout.bucket(KEYS[0]))[6]
    b.client.zadd(early, {KEYS[0]: 1})  # due since 1970
    assert b.store.prune_expired() == 0
    rescored = b.client.zscore(early, KEYS[0])
    assert rescored is not None and rescored > time.time() * 1000
    wait_expired(b)
    assert prune_all(b) == len(KEYS)
    assert_no_dead_keys(b)


def test_a_renewed_instance_survives_and_stays_indexed(make: Any) -> None:
    ttl_s = TTL_S * 2  # a commit every ttl/10: a loaded machine may stall ~1.8 s
    b = make(ttl_s=ttl_s)
    populate(b)
    deadline = time.monotonic() + ttl_s * 2
    version = 1
    while time.monotonic() < deadline:  # keep KEYS[0] busy past two TTLs
        version = b.store.commit(
            unit(KEYS[0], version, snap(items=version), next_due_ms=5, state_ids=("order",))
        ).version
        time.sleep(ttl_s / 10)
    wait_expired(b, KEYS[1:])
    b.store.prune_expired()
    assert b.store.due_keys(10) == [(KEYS[0], 5)]
    assert list(b.store.list_keys()) == [KEYS[0]]
    assert b.store.load(KEYS[0]).version == version


def test_an_expired_key_keeps_its_version_floor(make: Any) -> None:
    b = make(ttl_s=TTL_S)
    b.store.save("k", snap(), expected_version=0)
    b.store.save("k", snap(items=1), expected_version=1)
    wait_expired(b, ["k"])
    assert b.store.load("k") is None
    assert b.store.save("k", snap(), expected_version=0) == 3


def test_a_commit_by_a_store_without_ttl_makes_the_instance_permanent(make: Any) -> None:
    """Every commit sets the idle expiry of the store that made it: a store
    with ``ttl_s=None`` (say, after the setting was removed) must not leave
    an older expiry running."""
    from django_xsm.redis import RedisStore

    b = make(ttl_s=TTL_S)
    permanent = RedisStore(b.client, prefix=b.store.prefix)
    b.store.commit(unit("k", 0, snap(), log_entries=(entry(),)), log=b.log)
    permanent.commit(unit("k", 1, snap(items=1), log_entries=(entry(),)), log=b.log)
    layout = layout_of(b.store)
    assert b.client.pttl(layout.snapshot("k")) == -1
    assert b.client.pttl(layout.log("k")) == -1
    assert "k" not in indexed(b)["exp"]
    assert permanent.load("k").version == 2
