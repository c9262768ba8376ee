"""DueTimerScanner: durable `after` deadlines fire exactly once per state
entry, never early, with many scanners at once; failures back off and
dead-letter without stopping the scan. Time is a FakeClock throughout."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import StoreUnavailableError
from django_xsm.persistence import (
    AuditPlugin,
    DueTimerScanner,
    PessimisticLock,
    Plugin,
    persisted,
    replay,
)
from django_xsm.persistence.timer_state import failure_key
from tests.persistence.conftest import block_clock
from tests.support import TIMER_CHART, Backends, FakeClock, timer_machine


def _count(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    if ctx.get("poison") == "encode":
        ctx["tags"] = {"a set", "JSON cannot hold"}  # fails at commit, not here
    elif ctx.get("poison"):
        raise RuntimeError("downstream refused the expiry")
    ctx["fired"] += 1


T = timer_machine(_count)
MACHINES = {"timer": T}


def create(b: Backends, key: str, **context: Any) -> int:
    """A waiting instance; returns its deadline's due time."""
    with persisted(b.store, key, T, context={"fired": 0, **context}) as t:
        t.send("POKE")  # a first event, so the instance is saved
        return int(t.deadlines[0].due_ms)


def fired(b: Backends, key: str) -> int:
    return int(b.store.load(key).snapshot["context"]["fired"])


def scanner(b: Backends, clock: FakeClock, **kw: Any) -> DueTimerScanner:
    # these tests follow the exact schedule (the ceilings): jitter has its own test
    kw.setdefault("jitter", False)
    return DueTimerScanner(b.store, MACHINES, now=clock, **kw)


def test_a_due_deadline_fires_exactly_once_and_never_early(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")
    s = scanner(b, clock)
    assert s.scan(now=due - 1).fired == 0 and s.fire("t:1", now=due - 1).stale == 1
    assert fired(b, "t:1") == 0 and b.store.load("t:1").snapshot["value"] == "waiting"
    assert s.due(now=due) == [("t:1", due)]
    clock.now = due
    result = s.scan()
    assert (result.scanned, result.fired, result.max_lag_ms) == (1, 1, 0)
    for later in (due, due + 1, due + 60_000):
        assert s.scan(now=later).fired == 0
    record = b.store.load("t:1")
    assert record.snapshot["value"] == "expired" and fired(b, "t:1") == 1
    assert record.snapshot["deadlines"] == [] and s.due(now=due + 60_000) == []


@pytest.mark.parametrize("due_ms", [2_187_772_197_311, 1_089_262_107_751])
def test_a_deadline_due_exactly_now_is_found(b: Backends, due_ms: int) -> None:
    """ms / 1000 * 1000 is a hair below ms for these values."""
    clock = block_clock(b)
    clock.now = due_ms - 1000
    assert create(b, "t:1") == due_ms
    assert scanner(b, clock).scan(now=due_ms).fired == 1


def test_re_entry_re_arms_and_the_old_deadline_never_fires(b: Backends) -> None:
    clock = block_clock(b)
    first_due = create(b, "t:1")
    entry = b.store.load("t:1").snapshot["deadlines"][0]["entry"]
    clock.advance(500)
    with persisted(b.store, "t:1", T) as t:
        t.send("POKE")  # leave and re-enter "waiting"
        (deadline,) = t.deadlines
    assert deadline.due_ms == first_due + 500 and deadline.entry > entry
    s = scanner(b, clock)
    assert s.scan(now=first_due).fired == 0 and s.fire("t:1", now=first_due).stale == 1
    assert s.scan(now=first_due + 500).fired == 1 and fired(b, "t:1") == 1
    with persisted(b.store, "t:1", T) as t:
        t.send("RESTART")  # re-entry from "expired": a fresh deadline
    assert s.scan(now=clock.now + 1000).fired == 1 and fired(b, "t:1") == 2


def test_a_scanner_that_loaded_a_superseded_entry_counts_it_stale(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")

    class Interloper(Plugin):
        def before_send(self, block: Any, event_type: str, payload: Any) -> None:
            with persisted(b.store, "t:1", T) as user:  # a user re-enters meanwhile
                user.send("POKE")

    result = scanner(b, clock, plugins=[Interloper()]).scan(now=due)
    assert (result.fired, result.stale) == (0, 1)
    assert fired(b, "t:1") == 0 and b.store.load("t:1").snapshot["value"] == "waiting"


def test_many_scanners_at_once_fire_each_entry_exactly_once(b: Backends) -> None:
    clock = block_clock(b)
    keys = [f"t:{i}" for i in range(12)]
    due = max(create(b, k) for k in keys)
    scanners = [scanner(b, clock) for _ in range(4)]
    results: list[Any] = []
    start = threading.Barrier(len(scanners))

    def run(s: DueTimerScanner) -> None:
        start.wait()
        results.append(s.scan(now=due))

    threads = [threading.Thread(target=run, args=(s,)) for s in scanners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(r.fired for r in results) == len(keys)
    assert sum(r.errors for r in results) == 0
    assert [fired(b, k) for k in keys] == [1] * len(keys)


def test_a_locked_instance_is_counted_and_left_for_the_next_scan(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")
    s = scanner(b, clock, lock=PessimisticLock(timeout=0))
    with persisted(b.store, "t:1", T, lock=PessimisticLock()):
        result = s.scan(now=due)
    assert (result.scanned, result.locked, result.fired) == (1, 1, 0)
    assert s.scan(now=due).fired == 1 and fired(b, "t:1") == 1


def test_a_failing_fire_backs_off_then_dead_letters_while_others_fire(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:bad", poison=True)
    create(b, "t:good")
    s = scanner(b, clock, max_attempts=3, backoff_s=1, max_backoff_s=10)
    plan = [(0, 1, 1000), (1000, 2, 2000), (3000, 3, None)]  # offset, attempt, next delay
    for offset, attempt, delay in plan:
        assert s.scan(now=due + offset - 1).errors == 0  # not before its retry time
        result = s.scan(now=due + offset)
        assert (result.errors, result.failed_keys) == (1, ["t:bad"])
        assert result.fired == (1 if attempt == 1 else 0)  # t:good fired in the first pass
        (failure,) = b.store.load("t:bad").timer_failures.values()
        assert failure.attempts == attempt and "downstream refused" in failure.error
        if delay is None:
            assert failure.dead and result.dead_lettered == 1
        else:
            assert not failure.dead and failure.next_attempt_ms == due + offset + delay
    assert [k for k, _ in b.store.dead_letters()] == ["t:bad"]
    assert s.scan(now=due + 10**7).scanned == 0  # parked: scanners skip it
    assert fired(b, "t:bad") == 0 and fired(b, "t:good") == 1
    assert b.store.load("t:bad").version == 1  # failures never bumped the version


def test_a_fire_whose_commit_fails_backs_off_and_dead_letters_too(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1", poison="encode")
    s = scanner(b, clock, max_attempts=2, backoff_s=1)
    first = s.scan(now=due)
    assert (first.errors, first.fired) == (1, 0)
    (failure,) = b.store.load("t:1").timer_failures.values()
    assert failure.attempts == 1 and "UnstorableValueError" in failure.error
    assert s.scan(now=due + 999).scanned == 0  # backing off, not rescanned every pass
    assert s.scan(now=due + 1000).dead_lettered == 1
    assert [k for k, _ in b.store.dead_letters()] == ["t:1"] and fired(b, "t:1") == 0


def test_an_operator_force_fires_a_dead_letter_after_fixing_it(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1", poison=True)
    s = scanner(b, clock, max_attempts=1)
    assert s.scan(now=due).dead_lettered == 1
    with persisted(b.store, "t:1", T) as t:
        t.context["poison"] = False  # the operator's fix
    assert b.store.load("t:1").timer_failures  # still parked
    result = s.fire("t:1", force=True)
    assert result.fired == 1 and fired(b, "t:1") == 1
    assert b.store.dead_letters() == [] and not b.store.load("t:1").timer_failures


def test_force_fires_a_deadline_that_is_not_due_yet(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")
    s = scanner(b, clock)
    assert s.fire("t:1", now=due - 999).stale == 1
    assert s.fire("t:1", now=due - 999, force=True).fired == 1 and fired(b, "t:1") == 1


def test_max_lag_is_the_latest_fire_after_its_due_time(b: Backends) -> None:
    clock = block_clock(b)
    due_a = create(b, "t:a")
    clock.advance(100)
    create(b, "t:b")
    result = scanner(b, clock).scan(now=due_a + 350)
    assert result.fired == 2 and result.max_lag_ms == 350
    assert result.as_dict()["max_lag_ms"] == 350


def test_an_instance_that_cannot_be_opened_backs_off_and_starves_no_one(b: Backends) -> None:
    clock = block_clock(b)
    legacy = create_machine(
        {**TIMER_CHART, "id": "legacy"}, logic=MachineLogic(actions={"count": _count})
    )
    for i in range(3):  # the earliest deadlines belong to a machine nobody registered
        with persisted(b.store, f"l:{i}", legacy) as t:
            t.send("POKE")
    clock.advance(10)
    due = create(b, "t:1")
    s = scanner(b, clock, max_attempts=2, backoff_s=1)
    first = s.scan(now=due, limit=2)
    assert (first.errors, first.fired, first.failed_keys) == (2, 0, ["l:0", "l:1"])
    second = s.scan(now=due, limit=2)  # the failed ones backed off: others get their turn
    assert (second.errors, second.fired) == (1, 1) and fired(b, "t:1") == 1
    (failure,) = b.store.load("l:0").timer_failures.values()
    assert failure.attempts == 1 and "UnknownMachineError" in failure.error
    assert s.scan(now=due + 1000).dead_lettered == 3
    assert sorted(k for k, _ in b.store.dead_letters()) == ["l:0", "l:1", "l:2"]
    assert s.scan(now=due + 10**7).scanned == 0
    # Registering the machine and firing by hand clears the parking.
    fixed = DueTimerScanner(b.store, {"legacy": legacy}, now=clock)
    assert fixed.fire("l:0", force=True).fired == 1
    assert not b.store.load("l:0").timer_failures
    assert sorted(k for k, _ in b.store.dead_letters()) == ["l:1", "l:2"]


def test_a_snapshot_that_fails_to_migrate_is_parked_not_rescanned(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")
    bumped = create_machine(TIMER_CHART, logic=MachineLogic(actions={"count": _count}), version="2")
    s = DueTimerScanner(b.store, {"timer": bumped}, now=clock, max_attempts=1)
    result = s.scan(now=due)
    assert (result.errors, result.dead_lettered) == (1, 1)
    assert "MigrationError" in next(iter(b.store.load("t:1").timer_failures.values())).error
    assert s.scan(now=due + 10**7).scanned == 0 and fired(b, "t:1") == 0


def test_run_forever_stops_when_told(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")
    clock.now = due
    stop = threading.Event()
    scans: list[Any] = []

    def on_scan(result: Any) -> None:
        scans.append(result)
        if len(scans) == 3:
            stop.set()

    worker = threading.Thread(
        target=lambda: scans.append(
            scanner(b, clock).run_forever(0.001, stop=stop, on_scan=on_scan)
        )
    )
    worker.start()
    worker.join(30)
    assert not worker.is_alive()
    total = scans[-1]
    assert len(scans) == 4 and total.fired == 1 and fired(b, "t:1") == 1
    calls = iter([False, True])
    assert scanner(b, clock).run_forever(0, stop=lambda: next(calls)).scanned == 0


def test_run_forever_waits_out_a_store_outage(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")
    clock.now = due
    real_due_keys = b.store.due_keys
    outages = [StoreUnavailableError("injected outage")]

    def flaky_due_keys(*args: Any, **kw: Any) -> Any:
        if outages:
            raise outages.pop()
        return real_due_keys(*args, **kw)

    b.store.due_keys = flaky_due_keys
    scans: list[Any] = []
    calls = iter([False, False, True])
    total = scanner(b, clock).run_forever(0, stop=lambda: next(calls), on_scan=scans.append)
    # an outage is "unavailable", not an error (errors are fires that raised)
    assert [(s.unavailable, s.errors) for s in scans] == [(1, 0), (0, 0)]
    assert total.fired == 1 and total.unavailable == 1 and fired(b, "t:1") == 1


CHART: dict[str, Any] = {
    "id": "timer",
    "initial": "waiting",
    "context": {"fired": 0, "notes": 0},
    "states": {
        "waiting": {
            "after": {"1000": {"target": "expired", "actions": "count"}},
            "on": {"NOTE": {"actions": "note"}, "POKE": {"target": "waiting", "reenter": True}},
        },
        "expired": {},
    },
}


def _note(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["notes"] += 1


NOTED = create_machine(CHART, logic=MachineLogic(actions={"count": _count, "note": _note}))


def test_deadlines_survive_loads_and_unrelated_events_verbatim(b: Backends) -> None:
    clock = block_clock(b)
    with persisted(b.store, "t:1", NOTED) as t:
        t.send("POKE")
    armed = b.store.load("t:1").snapshot["deadlines"]
    for _ in range(3):
        clock.advance(200)
        with persisted(b.store, "t:1", NOTED) as t:
            t.send("NOTE")  # a targetless transition does not re-arm
    record = b.store.load("t:1")
    assert record.snapshot["deadlines"] == armed and record.snapshot["context"]["notes"] == 3
    assert b.store.due_keys((armed[0]["due_ms"]) / 1000) == [("t:1", armed[0]["due_ms"])]
    s = DueTimerScanner(b.store, {"timer": NOTED}, now=clock)
    assert s.scan(now=armed[0]["due_ms"]).fired == 1


def test_timer_fires_are_audited_and_replay(b: Backends) -> None:
    clock = block_clock(b)
    with persisted(b.store, "t:1", T, plugins=[AuditPlugin(b.log)]) as t:
        t.send("POKE")
        due = t.deadlines[0].due_ms
    scanner(b, clock, plugins=[AuditPlugin(b.log)]).scan(now=due)
    last = b.log.read("t:1")[-1]
    assert (last.actor, last.reason, last.from_state, last.to_state) == (
        "xsm:timer", "timer", "waiting", "expired",
    )  # fmt: skip
    assert last.event_type.startswith("xstate.after.1000.")
    rebuilt = replay(b.log, T, "t:1")
    assert rebuilt.value == "expired" and rebuilt.context == {"fired": 1}


def test_failure_bookkeeping_is_keyed_by_entry_and_event() -> None:
    (deadline,) = T.start(clock=lambda: 0).deadlines
    assert failure_key(deadline) == f"{deadline.entry}:{deadline.event_type}"


def test_a_fire_names_the_operator_and_re_arms_from_the_scan_time(bl: Backends) -> None:
    clock = block_clock(bl)
    audit = AuditPlugin(bl.log)
    chart = {
        "id": "tick",
        "initial": "on",
        "states": {"on": {"after": {"1000": {"target": "on", "reenter": True}}}},
    }
    machine = create_machine(chart)
    with persisted(bl.store, "t:op", machine, plugins=[audit]) as block:
        block.context["started"] = True
    scanner = DueTimerScanner(bl.store, {"tick": machine}, plugins=[audit], now=clock)
    later = clock.now + 5_000
    result = scanner.fire("t:op", now=later, actor="admin:ann")
    assert result.fired == 1
    assert bl.log.read_last("t:op", count=1)[0].actor == "admin:ann"
    # the re-entered state's deadline counts from the scan's now
    assert [d["due_ms"] for d in bl.store.load("t:op").snapshot["deadlines"]] == [later + 1000]


def test_run_forever_waits_after_a_full_page_of_locked_keys_instead_of_spinning(
    b: Backends,
) -> None:
    clock = block_clock(b)
    due = create(b, "t:1")
    clock.now = due
    assert b.store.acquire_lock("t:1", "someone-else", 60_000) == 0

    class CountingStop(threading.Event):
        waits = 0

        def wait(self, timeout: float | None = None) -> bool:
            CountingStop.waits += 1
            if CountingStop.waits == 2:
                self.set()
            return self.is_set()

    stop = CountingStop()
    s = scanner(b, clock, lock=PessimisticLock(timeout=0))
    total = s.run_forever(0.01, stop=stop, limit=1)
    # two passes, each a full page (limit=1) of a locked key, each followed by a wait
    assert CountingStop.waits == 2 and total.scanned == 2 and total.locked == 2
    assert total.fired == 0


def test_a_key_gone_between_due_keys_and_open_counts_as_stale(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:gone")
    b.store.forget("t:gone")
    result = scanner(b, clock).fire("t:gone", now=due)
    assert (result.stale, result.errors, result.fired) == (1, 0, 0)


def test_retries_wait_a_random_time_up_to_the_doubling_ceiling(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:bad", poison=True)
    s = scanner(b, clock, jitter=True, rng=random.Random(7), max_attempts=12)
    assert s.max_attempts == 12 and DueTimerScanner(b.store, MACHINES).max_attempts == 10
    now, waits = due, []
    for attempt in range(1, 12):
        assert s.scan(now=now).errors == 1
        (failure,) = b.store.load("t:bad").timer_failures.values()
        assert failure.attempts == attempt and not failure.dead
        wait = failure.next_attempt_ms - now
        assert 0 <= wait <= min(300_000, 1000 * 2 ** (attempt - 1))
        waits.append(wait)
        now = failure.next_attempt_ms
    assert len(set(waits)) > 5  # random, not the ceilings
    assert s.backoff.ceiling_ms(10) == s.backoff.ceiling_ms(11) == 300_000  # the cap is reached
    assert s.scan(now=now).dead_lettered == 1


def test_a_dead_timer_is_redriven_and_fires_at_the_next_scan(b: Backends) -> None:
    clock = block_clock(b)
    due = create(b, "t:1", poison=True)
    s = scanner(b, clock, max_attempts=1)
    assert s.scan(now=due).dead_lettered == 1
    with persisted(b.store, "t:1", T) as t:
        t.context["poison"] = False  # the operator's fix
    assert [k for k, _ in b.store.dead_letters()] == ["t:1"]
    assert s.redrive("t:1") is True
    assert b.store.dead_letters() == [] and not b.store.load("t:1").timer_failures
    assert s.scan(now=due + 1).fired == 1 and fired(b, "t:1") == 1
    assert s.redrive("t:1") is False  # nothing dead any more
    assert s.redrive("t:missing") is False
