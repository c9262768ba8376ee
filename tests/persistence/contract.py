"""The store / inbox / log contract, written once (docs/guarantees.md).

Every backend runs these classes: subclass them with ``flavour = "memory"``,
``"fakeredis"`` or ``"live"`` (see ``tests/support.py``). Test names say
the guarantee they check.
"""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import uuid
from typing import Any

import pytest

from django_xsm.exceptions import (
    ConflictError,
    InvalidConfigError,
    SnapshotTooLargeError,
)
from django_xsm.persistence.outbox import Emitted
from django_xsm.persistence.records import (
    ClaimRequest,
    ClaimStatus,
    InboxMark,
    InboxRelease,
    OpenRequest,
    TimerFailure,
)
from tests.support import Backends, backend_factory, entry, order_machine, snap, unit


def claim(
    key: str = "k1",
    *,
    fp: str = "fp",
    owner: str = "o1",
    scope: str = "acct",
    lease_ms: int = 200,
    instance: str = "order:1",
) -> ClaimRequest:
    return ClaimRequest(scope, instance, key, fp, owner, lease_ms)


class _Base:
    flavour = "memory"

    @pytest.fixture
    def make(self) -> Any:
        yield from backend_factory(self.flavour)

    @pytest.fixture
    def b(self, make: Any) -> Backends:
        return make()


class StoreContract(_Base):
    def test_load_of_a_missing_key_is_none(self, b: Backends) -> None:
        assert b.store.load("nope") is None

    def test_save_creates_version_1_and_load_round_trips(self, b: Backends) -> None:
        s = snap(items=3) | {"machine_version": "v1"}
        assert b.store.save("order:1", s, expected_version=0) == 1
        rec = b.store.load("order:1")
        assert rec.version == 1 and rec.machine_version == "v1"
        assert rec.snapshot == s and rec.machine_id == "order"
        assert rec.updated_ms > 0 and rec.updated_at.tzinfo is not None

    def test_save_is_a_compare_and_set_and_conflict_writes_nothing(self, b: Backends) -> None:
        b.store.save("order:1", snap(items=1), expected_version=0)
        b.store.save("order:1", snap(items=2), expected_version=1)
        with pytest.raises(ConflictError) as err:
            b.store.save("order:1", snap(items=99), expected_version=1)
        assert err.value.actual == 2 and err.value.expected == 1 and err.value.key == "order:1"
        assert b.store.load("order:1").snapshot["context"]["items"] == 2
        with pytest.raises(ConflictError) as err:
            b.store.save("order:1", snap(), expected_version=0)
        assert err.value.actual == 2

    def test_versions_never_restart_after_delete_or_forget(self, b: Backends) -> None:
        for _ in range(3):
            v = b.store.load("k").version if b.store.load("k") else 0
            b.store.save("k", snap(), expected_version=v)
        assert b.store.delete("k") is True
        assert b.store.load("k") is None
        assert b.store.save("k", snap(), expected_version=0) == 4
        b.store.forget("k")
        assert b.store.save("k", snap(), expected_version=0) == 5

    def test_creating_against_a_stale_floor_is_a_conflict(self, b: Backends) -> None:
        # No ABA: a writer that saw the key absent (floor 0) must not create
        # it after someone else created and deleted it in between.
        opened = b.store.open(OpenRequest("k"))
        assert opened.record is None and opened.floor == 0
        b.store.save("k", snap(), expected_version=0)
        b.store.delete("k")
        with pytest.raises(ConflictError):
            b.store.commit(unit("k", 0, snap(), floor=opened.floor))
        assert b.store.load("k") is None

    def test_a_retried_commit_is_recognised_by_its_id(self, b: Backends) -> None:
        u = unit("k", 0, snap(items=1), commit_id="same-id")
        first = b.store.commit(u)
        again = b.store.commit(u)
        assert first.version == 1 and not first.replayed
        assert again.version == 1 and again.replayed
        assert b.store.load("k").version == 1

    def test_a_retried_commit_is_recognised_after_other_writers_committed(
        self, b: Backends
    ) -> None:
        first = unit("k", 0, snap(items=1), commit_id="first")
        b.store.commit(first)
        for v in range(1, 4):
            b.store.commit(unit("k", v, snap(items=v + 1)))
        again = b.store.commit(first)  # the reply of the first was lost
        assert again.replayed and again.version == 1
        record = b.store.load("k")
        assert record.version == 4 and record.snapshot["context"]["items"] == 4

    @pytest.mark.parametrize("commit_id", ["", "has space", "x" * 129, "tab\t"])
    def test_a_commit_id_must_be_printable_without_spaces(
        self, b: Backends, commit_id: str
    ) -> None:
        with pytest.raises(InvalidConfigError):
            b.store.commit(unit("k", 0, snap(items=1), commit_id=commit_id))
        assert b.store.load("k") is None

    def test_a_held_lock_fences_other_writers(self, b: Backends) -> None:
        b.store.save("k", snap(), expected_version=0)
        assert b.store.acquire_lock("k", "tok-a", 5_000) == 0
        assert b.store.acquire_lock("k", "tok-b", 5_000) > 0
        with pytest.raises(ConflictError) as err:
            b.store.commit(unit("k", 1, snap(items=5)))  # optimistic: no token
        assert err.value.reason == "lock"
        with pytest.raises(ConflictError):
            b.store.commit(unit("k", 1, snap(items=5), lock_token="tok-b"))
        r = b.store.commit(unit("k", 1, snap(items=5), lock_token="tok-a", release_lock=True))
        assert r.version == 2
        assert b.store.acquire_lock("k", "tok-b", 5_000) == 0

    def test_a_holder_whose_lock_expired_cannot_commit(self, b: Backends) -> None:
        b.store.save("k", snap(), expected_version=0)
        assert b.store.acquire_lock("k", "slow", 50) == 0
        b.pass_time(120)
        assert b.store.acquire_lock("k", "next", 5_000) == 0
        b.store.commit(unit("k", 1, snap(items=7), lock_token="next"))
        with pytest.raises(ConflictError):
            b.store.commit(unit("k", 1, snap(items=666), lock_token="slow"))
        assert b.store.load("k").snapshot["context"]["items"] == 7

    def test_release_lock_is_compare_and_delete(self, b: Backends) -> None:
        assert b.store.acquire_lock("k", "a", 5_000) == 0
        assert b.store.release_lock("k", "b") is False
        assert b.store.release_lock("k", "a") is True
        assert b.store.release_lock("k", "a") is False

    def test_oversized_snapshot_raises_and_writes_nothing(self, make: Any) -> None:
        b = make(max_snapshot_bytes=200)
        with pytest.raises(SnapshotTooLargeError) as err:
            b.store.save("k", snap(blob="x" * 500), expected_version=0)
        assert err.value.limit == 200 and err.value.size > 200
        assert b.store.load("k") is None

    def test_non_json_context_values_round_trip_exactly_or_raise(self, b: Backends) -> None:
        when = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
        ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
        value = {
            "price": decimal.Decimal("10.10"),
            "when": when,
            "id": ident,
            "pair": (1, 2),
            "raw": b"\x00\xff",
            "$xsm": "user data",
        }
        b.store.save("k", snap(data=value), expected_version=0)
        assert b.store.load("k").snapshot["context"]["data"] == value
        with pytest.raises(TypeError, match=r"context\.bad"):
            b.store.save("j", snap(bad={1, 2}), expected_version=0)
        with pytest.raises(TypeError, match="key"):
            b.store.save("j", snap(bad={1: "int key"}), expected_version=0)
        assert b.store.load("j") is None

    def test_bad_keys_are_refused_clearly(self, b: Backends) -> None:
        for bad in ("", "x" * 600, "a\nb", None, 42):
            with pytest.raises(InvalidConfigError):
                b.store.load(bad)

    def test_list_keys_matches_prefixes_literally(self, b: Backends) -> None:
        for key in ("a*1", "a*2", "ab", "a?c", "a[1]", "b"):
            b.store.save(key, snap(), expected_version=0)
        assert list(b.store.list_keys("a*")) == ["a*1", "a*2"]
        assert list(b.store.list_keys("a?")) == ["a?c"]
        assert list(b.store.list_keys("a[")) == ["a[1]"]
        assert list(b.store.list_keys()) == sorted(["a*1", "a*2", "ab", "a?c", "a[1]", "b"])

    def test_list_page_cursor_is_empty_at_the_end_of_a_prefix(self, b: Backends) -> None:
        for key in ("ab", "b1", "b2", "c"):
            b.store.save(key, snap(), expected_version=0)
        assert b.store.list_page("b", limit=1) == (["b1"], "b1")
        assert b.store.list_page("b", after="b1", limit=1) == (["b2"], "")
        assert b.store.list_page("b", limit=2) == (["b1", "b2"], "")

    def test_list_page_pages_with_a_cursor(self, b: Backends) -> None:
        keys = [f"order:{i:03d}" for i in range(23)]
        for key in keys:
            b.store.save(key, snap(), expected_version=0)
        seen, after = [], ""
        while True:
            page, after = b.store.list_page("order:", after=after, limit=5)
            seen += page
            assert len(page) <= 5
            if not after:
                break
        assert seen == keys

    def test_list_page_filters_by_machine_and_state(self, b: Backends) -> None:
        m = order_machine()
        paid = m.start()
        paid.send("PAY")
        for i, inst in enumerate([m.start(), paid, m.start()]):
            b.store.commit(unit(f"o{i}", 0, inst.snapshot(), state_ids=tuple(inst.state_ids)))
        assert b.store.list_page(state="order.paid")[0] == ["o1"]
        assert b.store.list_page(state="order.cart")[0] == ["o0", "o2"]
        assert b.store.list_page(machine="order")[0] == ["o0", "o1", "o2"]
        assert b.store.list_page(machine="other")[0] == []
        # moving to another state moves it in the index
        b.store.commit(unit("o0", 1, paid.snapshot(), state_ids=tuple(paid.state_ids)))
        assert b.store.list_page(state="order.paid")[0] == ["o0", "o1"]

    def test_due_keys_are_earliest_first_and_limited(self, b: Backends) -> None:
        base = 1_800_000_000_000
        for i, due in enumerate([base + 300, base + 100, base + 200, base + 10_000]):
            b.store.commit(unit(f"t{i}", 0, snap(), next_due_ms=due))
        due = b.store.due_keys((base + 1_000) / 1000)
        assert due == [("t1", base + 100), ("t2", base + 200), ("t0", base + 300)]
        assert b.store.due_keys((base + 1_000) / 1000, limit=2) == due[:2]
        b.store.commit(unit("t1", 1, snap(items=1), next_due_ms=None))
        assert [k for k, _ in b.store.due_keys((base + 1_000) / 1000)] == ["t2", "t0"]

    def test_due_keys_accepts_aware_datetimes_only(self, b: Backends) -> None:
        assert b.store.due_keys(dt.datetime.now(tz=dt.UTC)) == []
        with pytest.raises(InvalidConfigError):
            b.store.due_keys(dt.datetime(2030, 1, 1))

    def test_delete_leaves_a_held_lock_and_the_log(self, b: Backends) -> None:
        b.store.commit(
            unit("k", 0, snap(), log_entries=(entry(),), next_due_ms=5), inbox=b.inbox, log=b.log
        )
        b.store.acquire_lock("k", "tok", 5_000)
        assert b.store.delete("k") is True
        assert b.store.delete("k") is False
        assert b.store.acquire_lock("k", "other", 5_000) > 0
        assert [r.event_type for r in b.log.read("k")] == ["ADD"]
        assert b.store.due_keys(10) == [] and list(b.store.list_keys()) == []

    def test_forget_erases_everything_and_reports_counts(self, b: Backends) -> None:
        b.store.commit(
            unit("k", 0, snap(), log_entries=(entry(), entry("PAY")), next_due_ms=5),
            inbox=b.inbox,
            log=b.log,
        )
        b.store.acquire_lock("k", "tok", 5_000)
        counts = b.store.forget("k")
        assert counts == {"snapshot": 1, "deadlines": 1, "lock": 1, "log": 2}
        assert b.store.load("k") is None and b.log.read("k") == []
        assert b.store.acquire_lock("k", "other", 5_000) == 0
        assert b.store.due_keys(10) == [] and list(b.store.list_keys()) == []

    def test_timer_failures_are_fenced_by_version_and_park_dead_letters(self, b: Backends) -> None:
        b.store.commit(unit("k", 0, snap(), next_due_ms=100))
        fail = {"3:xstate.after.1000.timer.waiting": TimerFailure(5, 0, dead=True, error="Boom")}
        assert (
            b.store.record_timer_failure("k", expected_version=2, failures=fail, next_due_ms=None)
            is False
        )
        assert (
            b.store.record_timer_failure("k", expected_version=1, failures=fail, next_due_ms=None)
            is True
        )
        assert b.store.load("k").timer_failures == fail
        assert b.store.due_keys(10) == []
        assert [k for k, _ in b.store.dead_letters()] == ["k"]
        b.store.commit(unit("k", 1, snap(items=1), timer_failures={}, next_due_ms=None))
        assert b.store.dead_letters() == [] and b.store.load("k").timer_failures == {}

    def test_idle_instances_expire_with_ttl(self, make: Any) -> None:
        b = make(ttl_s=0.1)
        b.store.commit(unit("k", 0, snap(), next_due_ms=5))
        assert b.store.load("k") is not None
        b.pass_time(150)
        assert b.store.load("k") is None
        assert list(b.store.list_keys()) == [] and b.store.due_keys(10) == []

    def test_due_keys_skip_instances_that_expired_with_ttl(self, make: Any) -> None:
        b = make(ttl_s=0.1)
        for i in range(3):
            b.store.commit(unit(f"k{i}", 0, snap(), next_due_ms=5 + i))
        b.pass_time(150)
        assert b.store.due_keys(10) == []  # first thing after expiry: no crash, no ghosts
        assert list(b.store.list_keys()) == []

    def test_health_reports_ok(self, b: Backends) -> None:
        health = b.store.health()
        assert health["ok"] is True

    def test_the_store_s_inbox_log_and_outbox_are_parts_of_its_one_commit(
        self, b: Backends
    ) -> None:
        store = b.store
        assert store.shares_commit(store.inbox) and store.shares_commit(store.log)
        c = claim(lease_ms=5_000)
        opened = store.open(OpenRequest("order:1", claims=(c,)))  # into store.inbox
        assert opened.claims[0].status == ClaimStatus.CLAIMED
        u = unit(
            "order:1", 0, snap(items=1), commit_id="c1",
            marks=(InboxMark(c, {"ok": True}, 60_000),),
            log_entries=(entry("ADD"),),
            emitted=(Emitted("c1-0", {"type": "order.added", "n": 1}),),
        )  # fmt: skip
        store.commit(u)  # marks, entries and events land in the store's parts
        assert store.inbox.get("acct", "order:1", "k1")["state"] == "done"
        assert [r.event_type for r in store.log.read("order:1")] == ["ADD"]
        leases = store.outbox.take("w1", count=10)
        assert [(x.entry.delivery_id, x.entry.event["type"]) for x in leases] == [
            ("c1-0", "order.added")
        ]

    def test_concurrent_optimistic_writers_lose_no_update(self, b: Backends) -> None:
        b.store.save("k", snap(items=0), expected_version=0)
        m = order_machine()

        def bump() -> None:
            for _ in range(200):
                rec = b.store.load("k")
                inst = m.restore(rec.snapshot)
                inst.send("ADD")
                try:
                    b.store.commit(unit("k", rec.version, inst.snapshot()))
                    return
                except ConflictError:
                    continue
            raise AssertionError("never committed")

        threads = [threading.Thread(target=bump) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rec = b.store.load("k")
        assert rec.snapshot["context"]["items"] == 8 and rec.version == 9


class InboxContract(_Base):
    def test_the_first_claim_wins(self, b: Backends) -> None:
        assert b.inbox.claim(claim(owner="a")).status == ClaimStatus.CLAIMED
        second = b.inbox.claim(claim(owner="b"))
        assert second.status == ClaimStatus.IN_FLIGHT and 0 < second.retry_after_ms <= 200
        assert b.inbox.claim(claim(owner="a")).status == ClaimStatus.CLAIMED  # re-entrant

    def test_a_different_fingerprint_is_a_mismatch(self, b: Backends) -> None:
        b.inbox.claim(claim(owner="a"))
        assert b.inbox.claim(claim(owner="b", fp="other")).status == ClaimStatus.MISMATCH

    def test_a_finished_claim_replays_its_receipt(self, b: Backends) -> None:
        c = claim(owner="a")
        b.inbox.claim(c)
        assert b.inbox.mark(InboxMark(c, {"status": 201, "body": "ok"}, ttl_ms=60_000)) is True
        done = b.inbox.claim(claim(owner="b"))
        assert done.status == ClaimStatus.DONE and done.receipt == {"status": 201, "body": "ok"}
        assert b.inbox.claim(claim(owner="b", fp="x")).status == ClaimStatus.MISMATCH
        row = b.inbox.get("acct", "order:1", "k1")
        assert row["state"] == "done" and row["receipt"] == {"status": 201, "body": "ok"}

    def test_a_lease_ends_so_a_dead_owner_blocks_only_briefly(self, b: Backends) -> None:
        b.inbox.claim(claim(owner="dead", lease_ms=50))
        b.pass_time(100)
        assert b.inbox.claim(claim(owner="next")).status == ClaimStatus.CLAIMED
        assert b.inbox.mark(InboxMark(claim(owner="dead"), {}, ttl_ms=1000)) is False

    def test_release_drops_only_the_owners_unfinished_claim(self, b: Backends) -> None:
        b.inbox.claim(claim(owner="a"))
        assert b.inbox.release(InboxRelease(claim(owner="b"))) is False
        assert b.inbox.release(InboxRelease(claim(owner="a"))) is True
        assert b.inbox.get("acct", "order:1", "k1") is None
        c = claim(owner="a")
        b.inbox.claim(c)
        b.inbox.mark(InboxMark(c, {}, ttl_ms=60_000))
        assert b.inbox.release(InboxRelease(c)) is False  # finished rows stay

    def test_receipts_expire_after_their_ttl(self, b: Backends) -> None:
        c = claim(owner="a")
        b.inbox.claim(c)
        b.inbox.mark(InboxMark(c, {"x": 1}, ttl_ms=60))
        b.pass_time(120)
        assert b.inbox.get("acct", "order:1", "k1") is None
        assert b.inbox.claim(claim(owner="z")).status == ClaimStatus.CLAIMED

    def test_purge_expired_removes_only_expired_rows(self, b: Backends) -> None:
        for i in range(5):
            c = claim(f"short{i}", owner="a")
            b.inbox.claim(c)
            b.inbox.mark(InboxMark(c, {}, ttl_ms=50))
        keep = claim("long", owner="a")
        b.inbox.claim(keep)
        b.inbox.mark(InboxMark(keep, {}, ttl_ms=60_000))
        b.pass_time(100)
        assert b.inbox.purge_expired() == 5
        assert b.inbox.purge_expired() == 0
        assert b.inbox.get("acct", "order:1", "long")["state"] == "done"

    def test_forget_scope_touches_no_other_scope_even_with_glob_characters(
        self, b: Backends
    ) -> None:
        for scope in ("acct*", "acct1", "acct?", "acct[1]"):
            b.inbox.claim(claim(scope=scope, owner="a"))
        assert b.inbox.forget("acct*") == 1
        assert b.inbox.get("acct*", "order:1", "k1") is None
        for scope in ("acct1", "acct?", "acct[1]"):
            assert b.inbox.get(scope, "order:1", "k1") is not None

    def test_scopes_and_instances_separate_claims(self, b: Backends) -> None:
        b.inbox.claim(claim(scope="s1", owner="a"))
        assert b.inbox.claim(claim(scope="s2", owner="b")).status == ClaimStatus.CLAIMED
        assert b.inbox.claim(claim(instance="order:2", owner="b")).status == ClaimStatus.CLAIMED


class LogContract(_Base):
    def test_append_next_numbers_records_from_one(self, b: Backends) -> None:
        assert [b.log.append_next("k", entry(str(i)), version=i) for i in range(3)] == [1, 2, 3]
        recs = b.log.read("k")
        assert [(r.seq, r.version, r.event_type) for r in recs] == [
            (1, 0, "0"),
            (2, 1, "1"),
            (3, 2, "2"),
        ]
        assert recs[0].payload == {"n": 1} and recs[0].actor == "alice"
        assert recs[0].correlation_id == "c-1" and recs[0].from_state == "cart"

    def test_read_pages_after_a_seq(self, b: Backends) -> None:
        for i in range(12):
            b.log.append_next("k", entry(f"E{i}"), version=1)
        assert [r.seq for r in b.log.read("k", after_seq=3, limit=4)] == [4, 5, 6, 7]
        assert [r.seq for r in b.log.read("k", after_seq=10)] == [11, 12]
        assert [r.seq for r in b.log.read_last("k", count=3)] == [10, 11, 12]
        assert b.log.read("other") == []

    def test_explicit_seq_must_grow(self, b: Backends) -> None:
        rec = entry().to_record("k", 5, 1)
        assert b.log.append(rec) == 5
        with pytest.raises(InvalidConfigError):
            b.log.append(entry().to_record("k", 5, 1))
        assert b.log.append_next("k", entry(), version=1) == 6

    def test_purge_older_than_never_reuses_seqs(self, b: Backends) -> None:
        base = 1_800_000_000_000
        for i in range(6):
            b.log.append_next("k", entry(ts=base + i * 1000), version=1)
        b.log.append_next("j", entry(ts=base), version=1)
        assert b.log.purge_older_than((base + 3500) / 1000) == 5
        assert [r.seq for r in b.log.read("k")] == [5, 6]
        assert b.log.read("j") == []
        assert b.log.purge_older_than(dt.datetime(2100, 1, 1, tzinfo=dt.UTC)) == 2
        assert b.log.append_next("k", entry(), version=1) == 7

    def test_maxlen_keeps_the_newest_records(self, make: Any) -> None:
        b = make(maxlen=5)
        for i in range(300):
            b.store.commit(
                unit("k", i, snap(items=i + 1), log_entries=(entry(f"E{i}"),)),
                inbox=b.inbox,
                log=b.log,
            )
        recs = b.log.read("k")
        # Redis trims approximately (MAXLEN ~): at least maxlen, far fewer than all
        assert 5 <= len(recs) < 300
        assert recs[-1].seq == 300 and recs[-1].event_type == "E299"


class CommitContract(_Base):
    """The unit of work: fences, marks and log records commit together."""

    def test_commit_writes_snapshot_marks_and_log_with_versions(self, b: Backends) -> None:
        c = claim(owner="w")
        b.inbox.claim(c)
        u = unit(
            "order:1",
            0,
            snap(items=1),
            log_entries=(entry(), entry("PAY")),
            marks=(InboxMark(c, {"ok": True}, 60_000),),
        )
        result = b.store.commit(u, inbox=b.inbox, log=b.log)
        assert result.version == 1 and result.first_seq == 1
        assert [(r.seq, r.version) for r in b.log.read("order:1")] == [(1, 1), (2, 1)]
        assert b.inbox.claim(claim(owner="x")).receipt == {"ok": True}

    def test_a_conflicting_commit_writes_no_marks_and_no_log(self, b: Backends) -> None:
        b.store.save("order:1", snap(), expected_version=0)
        c = claim(owner="w")
        b.inbox.claim(c)
        u = unit(
            "order:1",
            0,
            snap(items=1),
            log_entries=(entry(),),
            marks=(InboxMark(c, {"ok": True}, 60_000),),
        )
        with pytest.raises(ConflictError):
            b.store.commit(u, inbox=b.inbox, log=b.log)
        assert b.log.read("order:1") == []
        assert b.inbox.get("acct", "order:1", "k1")["state"] == "in_flight"

    def test_a_commit_whose_claim_was_taken_over_fails(self, b: Backends) -> None:
        b.inbox.claim(claim(owner="slow", lease_ms=50))
        b.pass_time(100)
        b.inbox.claim(claim(owner="fast"))
        u = unit("order:1", 0, snap(items=1), marks=(InboxMark(claim(owner="slow"), {}, 60_000),))
        with pytest.raises(ConflictError) as err:
            b.store.commit(u, inbox=b.inbox, log=b.log)
        assert (err.value.reason, err.value.actual) == ("claim", None)  # no record yet
        assert "taken over by another worker" in str(err.value)
        assert b.store.load("order:1") is None

    def test_log_order_is_commit_order(self, b: Backends) -> None:
        version = 0
        for i in range(5):
            r = b.store.commit(
                unit("k", version, snap(items=i), log_entries=(entry(f"E{i}"),)),
                inbox=b.inbox,
                log=b.log,
            )
            version = r.version
        assert [(r.event_type, r.version) for r in b.log.read("k")] == [
            (f"E{i}", i + 1) for i in range(5)
        ]

    def test_open_takes_lock_and_claims_together_or_not_at_all(self, b: Backends) -> None:
        c = claim(owner="me")
        res = b.store.open(OpenRequest("order:1", "tok", 5_000, (c,)), inbox=b.inbox)
        assert res.locked and res.claims[0].status == ClaimStatus.CLAIMED and res.record is None
        busy = b.store.open(
            OpenRequest("order:1", "tok2", 5_000, (claim(owner="you"),)), inbox=b.inbox
        )
        assert busy.lock_busy_ms > 0 and not busy.claims
        b.store.release_lock("order:1", "tok")
        dup = b.store.open(
            OpenRequest("order:1", "tok2", 5_000, (claim(owner="you"),)), inbox=b.inbox
        )
        assert dup.claims[0].status == ClaimStatus.IN_FLIGHT and not dup.locked
        # the refused open took no lock
        assert b.store.acquire_lock("order:1", "third", 5_000) == 0
