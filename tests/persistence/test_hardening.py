"""Findings of the outside checks (issue 12), on every backend (memory,
fakeredis, live): limits honoured on load, retries that say how often they
tried, the ``on_load`` hook, scanners limited to a key prefix, unreadable
due records parked, clear errors for lone surrogates, deep payloads and
wrong-typed arguments, skewed log records purged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from django_xsm.exceptions import (
    ArgumentTypeError,
    ConflictError,
    InvalidConfigError,
    SnapshotTooLargeError,
    UnstorableValueError,
    XsmError,
)
from django_xsm.persistence import (
    AuditPlugin,
    DueTimerScanner,
    MemoryStore,
    PessimisticLock,
    Plugin,
    aretry_on_conflict,
    persisted,
    retry_on_conflict,
)
from django_xsm.persistence.records import StoredRecord
from tests.persistence.conftest import block_clock
from tests.support import Backends, entry, order_machine, snap, timer_machine

M = order_machine()
T = timer_machine()


def plant_corrupt(b: Backends, key: str, data: bytes = b"{not json") -> None:
    """Damage the stored snapshot bytes of ``key`` (the version stays)."""
    layout = b.store.layout or b.store.driver.run(b.store.core.state.ensure())
    b.client.hset(layout.snapshot(key), "d", data)


def written(b: Backends, key: str) -> Any:
    record = b.store.load(key)
    return None if record is None else (record.version, record.snapshot)


# --- 1. max_snapshot_bytes on load, and set after construction ------------------------


def test_a_stored_snapshot_over_the_limit_is_refused_on_load(b: Backends) -> None:
    b.store.save("order:1", snap(note="x" * 500), expected_version=0)
    b.store.max_snapshot_bytes = 100  # as if written under a larger limit
    assert b.store.max_snapshot_bytes == 100
    with pytest.raises(SnapshotTooLargeError) as err:
        b.store.load("order:1")
    assert err.value.key == "order:1" and err.value.limit == 100 and err.value.size > 500
    with pytest.raises(SnapshotTooLargeError):
        with persisted(b.store, "order:1", M, lock=PessimisticLock()):
            pass
    assert b.store.lock_holder("order:1") is None  # the refused open took nothing
    b.store.max_snapshot_bytes = 1 << 20
    assert b.store.load("order:1").version == 1


def test_the_limit_on_load_is_checked_before_decoding(
    b: Backends, monkeypatch: pytest.MonkeyPatch
) -> None:
    b.store.save("order:1", snap(note="x" * 500), expected_version=0)
    b.store.max_snapshot_bytes = 100

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an oversized snapshot was decoded")

    monkeypatch.setattr(b.store.codec, "decode", never)
    with pytest.raises(SnapshotTooLargeError):
        b.store.load("order:1")


def test_max_snapshot_bytes_set_after_construction_is_honoured_on_save(b: Backends) -> None:
    b.store.max_snapshot_bytes = 50
    with pytest.raises(SnapshotTooLargeError):
        with persisted(b.store, "order:1", M) as o:
            o.send("ADD", n=1)
    assert b.store.load("order:1") is None
    for bad in (0, -1, True, 2.5, "1"):
        with pytest.raises(InvalidConfigError) as err:
            b.store.max_snapshot_bytes = bad
        assert err.value.path == "max_snapshot_bytes"
    assert b.store.max_snapshot_bytes == 50


# --- 3. retries say how often they tried ----------------------------------------------


def _always_conflicting(b: Backends) -> Any:
    def attempt() -> None:
        with persisted(b.store, "order:1", M) as o:
            o.send("ADD")
            record = b.store.load("order:1")
            b.store.save("order:1", snap(), expected_version=record.version if record else 0)

    return attempt


def test_retry_on_conflict_says_how_many_attempts_it_made(b: Backends) -> None:
    with pytest.raises(ConflictError) as err:
        retry_on_conflict(_always_conflicting(b), attempts=3, base_s=0, max_s=0)
    assert err.value.attempts == 3 and "after 3 attempts" in str(err.value)
    assert err.value.key == "order:1" and err.value.reason == "version"


def test_aretry_on_conflict_says_how_many_attempts_it_made(b: Backends) -> None:
    sync_attempt = _always_conflicting(b)

    async def attempt() -> None:
        sync_attempt()

    with pytest.raises(ConflictError) as err:
        asyncio.run(aretry_on_conflict(attempt, attempts=2, base_s=0, max_s=0))
    assert err.value.attempts == 2 and "after 2 attempts" in str(err.value)


# --- 8. an optimistic writer meeting a lock ---------------------------------------------


def test_an_optimistic_writer_meeting_a_held_lock_is_told_it_was_locked(b: Backends) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    with pytest.raises(ConflictError) as err:
        with persisted(b.store, "order:1", M) as o:
            o.send("ADD")
            assert b.store.acquire_lock("order:1", "holder", 30_000) == 0
    assert err.value.reason == "lock" and err.value.held_lock is False
    assert "locked by another writer" in str(err.value) and "was lost" not in str(err.value)
    b.store.release_lock("order:1", "holder")
    with pytest.raises(ConflictError) as lost:
        with persisted(b.store, "order:1", M, lock=PessimisticLock(ttl_ms=50)) as o:
            o.send("ADD")
            b.pass_time(80)  # our lease ran out and someone else took the lock
            assert b.store.acquire_lock("order:1", "next", 30_000) == 0
    assert lost.value.held_lock is True and "was lost before commit" in str(lost.value)


# --- 4. Plugin.on_load -----------------------------------------------------------------


class Recorder(Plugin):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_load(self, block: Any, record: StoredRecord | None) -> None:
        self.calls.append(("load", None if record is None else record.version))

    def before_send(self, block: Any, event_type: str, payload: Any) -> None:
        self.calls.append(("send", event_type))


def test_on_load_runs_once_per_block_before_the_first_event(b: Backends) -> None:
    rec = Recorder()
    with persisted(b.store, "order:1", M, plugins=[rec]):
        pass  # a block that sends nothing is a hydration too
    with persisted(b.store, "order:1", M, plugins=[rec]) as o:
        o.send("ADD")
        o.send("ADD")
    with persisted(b.store, "order:1", M, plugins=[rec]) as o:
        assert o.version == 1
    assert rec.calls == [
        ("load", None),
        ("load", None),
        ("send", "ADD"),
        ("send", "ADD"),
        ("load", 1),
    ]


def test_an_on_load_hook_that_raises_refuses_the_block_and_releases_its_lock(
    b: Backends,
) -> None:
    class Refuse(Plugin):
        def on_load(self, block: Any, record: StoredRecord | None) -> None:
            raise PermissionError("tenant mismatch")

    with pytest.raises(PermissionError):
        with persisted(b.store, "order:1", M, plugins=[Refuse()], lock=PessimisticLock()) as o:
            o.send("ADD")
    assert b.store.load("order:1") is None and b.store.lock_holder("order:1") is None


# --- 5. scanners limited to a key prefix --------------------------------------------


def _waiting(b: Backends, key: str) -> int:
    with persisted(b.store, key, T) as t:
        t.send("POKE")
        return int(t.deadlines[0].due_ms)


def test_a_scanner_with_a_key_prefix_fires_only_keys_starting_with_it(b: Backends) -> None:
    clock = block_clock(b)
    due = max(_waiting(b, k) for k in ("a:1", "a*:2", "ab:3", "b:4"))
    only_a = DueTimerScanner(b.store, {"timer": T}, now=clock, key_prefix="a*")
    assert [k for k, _ in only_a.due(now=due)] == ["a*:2"]  # '*' is a plain character
    result = only_a.scan(now=due)
    assert (result.scanned, result.fired) == (1, 1)
    assert {k: b.store.load(k).snapshot["value"] for k in ("a:1", "a*:2", "ab:3", "b:4")} == {
        "a:1": "waiting",
        "a*:2": "expired",
        "ab:3": "waiting",
        "b:4": "waiting",
    }
    with pytest.raises(InvalidConfigError):
        only_a.fire("b:4", now=due)
    rest = DueTimerScanner(b.store, {"timer": T}, now=clock).scan(now=due)
    assert rest.fired == 3
    with pytest.raises(ArgumentTypeError):
        DueTimerScanner(b.store, {"timer": T}, key_prefix=None)  # type: ignore[arg-type]


# --- 11. an unreadable due record is parked ---------------------------------------------


def test_a_due_record_that_cannot_be_read_is_parked_with_its_reason(b: Backends) -> None:
    clock = block_clock(b)
    due = _waiting(b, "t:bad")
    good = _waiting(b, "t:good")
    plant_corrupt(b, "t:bad")
    s = DueTimerScanner(b.store, {"timer": T}, now=clock)
    first = s.scan(now=max(due, good))
    assert (first.scanned, first.fired, first.dead_lettered) == (2, 1, 1)
    assert [k for k, _ in b.store.dead_letters()] == ["t:bad"]
    reasons = b.store.dead_letter_reasons(["t:bad", "t:good"])
    assert "SnapshotCorruptError" in reasons["t:bad"] and reasons["t:good"] == ""
    # parked: no scan reads it again
    assert s.due(now=due + 10**9) == [] and s.scan(now=due + 10**9).scanned == 0
    # repaired by a save over it: due again, no longer dead-lettered
    version = 1
    b.store.save("t:bad", snap(), expected_version=version)
    assert b.store.dead_letters() == [] and b.store.dead_letter_reasons(["t:bad"]) == {"t:bad": ""}


def test_a_due_record_over_the_size_limit_is_parked_too(b: Backends) -> None:
    clock = block_clock(b)
    due = _waiting(b, "t:big")
    b.store.max_snapshot_bytes = 20
    result = DueTimerScanner(b.store, {"timer": T}, now=clock).scan(now=due)
    assert result.dead_lettered == 1
    assert "SnapshotTooLargeError" in b.store.dead_letter_reasons(["t:big"])["t:big"]


# --- 13. the log purge does not stop at a newer record -------------------------------


def test_a_purge_removes_records_written_under_skewed_clocks(b: Backends) -> None:
    base = 1_800_000_000_000
    for seconds in (1, 60, 2, 3):  # the clock of the second writer ran ahead
        b.log.append_next("order:1", entry(ts=base + seconds * 1000), version=1)
    cutoff = (base + 30_000) / 1000
    assert b.log.count_older_than(cutoff) == 3
    assert b.log.purge_older_than(cutoff) == 3
    assert [r.timestamp_ms for r in b.log.read("order:1")] == [base + 60_000]
    assert b.log.count_older_than(cutoff) == 0
    assert b.log.purge_older_than((base + 61_000) / 1000) == 1
    assert b.log.read("order:1") == []


# --- 15. lone surrogates and deep payloads ---------------------------------------------


def test_a_lone_surrogate_in_the_context_is_refused_by_path_before_any_write(
    b: Backends,
) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M) as o:
            o.context["text"] = "\ud800"
            o.send("ADD")
    assert isinstance(err.value, XsmError)
    assert isinstance(err.value, TypeError) and isinstance(err.value, ValueError)
    assert err.value.path == "$.context.text"
    assert b.store.load("order:1") is None


def test_a_lone_surrogate_in_a_logged_payload_is_refused_before_the_event_runs(
    b: Backends,
) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M, plugins=[AuditPlugin(b.log)]) as o:
            o.send("ADD", text="\udfff")
    assert err.value.path == "$.payload.text"
    assert b.store.load("order:1") is None and b.log.read("order:1") == []


def test_a_lone_surrogate_key_is_refused_by_validate_key(b: Backends) -> None:
    for call in (
        lambda: b.store.load("order:\ud800"),
        lambda: persisted(b.store, "order:\ud800", M).__enter__(),
        lambda: b.store.lock_holder("\udc00"),
    ):
        with pytest.raises(InvalidConfigError, match="surrogate"):
            call()


def test_a_payload_nested_500_levels_is_refused_clearly(b: Backends) -> None:
    deep: Any = "leaf"
    for _ in range(500):
        deep = {"x": deep}
    with pytest.raises(InvalidConfigError, match="nested"):
        with persisted(b.store, "order:1", M, plugins=[AuditPlugin(b.log)]) as o:
            o.send("ADD", data=deep)
    assert b.store.load("order:1") is None


# --- 16. wrong-typed arguments ----------------------------------------------------------


def test_wrong_typed_arguments_are_clear_errors_naming_the_argument(b: Backends) -> None:
    cases: list[tuple[Any, str]] = [
        (lambda: persisted(b.store, "order:1", M, context=0), "context"),
        (lambda: persisted(b.store, "order:1", M, lock="pessimistic"), "lock"),
        (lambda: b.store.lock_holder(b"k"), "key"),
        (lambda: b.store.release_lock("k", None), "token"),
        (lambda: b.store.list_page(1), "prefix"),
        (lambda: b.store.list_page(after=2), "after"),
        (lambda: b.store.list_page(machine=3), "machine"),
        (lambda: b.store.list_page(state=b"s"), "state"),
        (lambda: b.store.list_page(limit="5"), "limit"),
        (lambda: b.store.dead_letters(limit="5"), "limit"),
        (lambda: b.store.dead_letters(limit=0), "limit"),
        (lambda: b.store.due_keys(0, limit=None), "limit"),
        (lambda: b.store.machine_ids("order:1"), "keys"),
    ]
    for call, path in cases:
        with pytest.raises(InvalidConfigError) as err:
            call()
        assert err.value.path == path, (path, err.value)
    with pytest.raises(ArgumentTypeError):
        persisted(b.store, "order:1", M, context=[("items", 1)])
    assert b.store.load("order:1") is None


# --- 7. ttl_s -----------------------------------------------------------------------------


@pytest.mark.parametrize("ttl_s", [0.0005, 0, -1, float("inf"), float("nan"), True, "60"])
def test_a_ttl_that_would_turn_expiry_off_or_fail_later_is_refused(ttl_s: Any) -> None:
    with pytest.raises(InvalidConfigError) as err:
        MemoryStore(ttl_s=ttl_s)
    assert err.value.path == "ttl_s"


def test_a_ttl_of_one_millisecond_is_accepted_and_ttl_s_may_be_set_later(b: Backends) -> None:
    b.store.ttl_s = 0.001
    assert b.store.ttl_s == 0.001
    with pytest.raises(InvalidConfigError):
        b.store.ttl_s = float("nan")
    b.store.ttl_s = None
