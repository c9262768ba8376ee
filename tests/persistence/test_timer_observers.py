"""The due-timer scanner's observers: each scan and each fire seen once,
inside the scan, with the final counts; the process's observers unless the
scanner has its own of the class; an observer's error is logged and
changes nothing the scan does or returns."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.exceptions import StoreUnavailableError
from django_xsm.persistence import DueTimerScanner, MemoryStore, ScanResult, persisted
from django_xsm.persistence.timers import (
    NO_OBSERVATION,
    ScanObserver,
    add_process_observer,
    observed,
    process_observers,
    remove_process_observer,
)
from tests.support import FakeClock, timer_machine

T = timer_machine()


class Recorder(ScanObserver):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, str | None]] = []

    @contextlib.contextmanager
    def scan(self, scanner: DueTimerScanner, result: ScanResult) -> Iterator[None]:
        self.seen.append(("scan", None, None))
        try:
            yield
        except Exception as exc:
            self.seen.append(("scan-failed", None, type(exc).__name__))
            raise
        self.seen.append(("scanned", (result.scanned, result.fired), None))

    @contextlib.contextmanager
    def fire(self, scanner: DueTimerScanner, key: str, result: ScanResult) -> Iterator[None]:
        yield
        self.seen.append(("fired", (result.fired, result.stale), key))


class Broken(ScanObserver):
    def scan(self, scanner: DueTimerScanner, result: ScanResult) -> Any:
        raise RuntimeError("scan hook broke")

    @contextlib.contextmanager
    def fire(self, scanner: DueTimerScanner, key: str, result: ScanResult) -> Iterator[None]:
        yield
        raise RuntimeError("fire hook broke on exit")


def _waiting(clock: FakeClock, *keys: str) -> tuple[MemoryStore, int]:
    store = MemoryStore(clock=clock)
    due = 0
    for key in keys:
        with persisted(store, key, T, context={"fired": 0}, clock=clock) as t:
            t.send("POKE")
            due = int(t.deadlines[0].due_ms)
    return store, due


def test_an_observer_sees_each_scan_and_fire_with_their_counts() -> None:
    clock = FakeClock()
    store, due = _waiting(clock, "t:1", "t:2")
    recorder = Recorder()
    scanner = DueTimerScanner(store, {"timer": T}, now=clock, observers=(recorder,))
    assert scanner.scan(now=due).fired == 2
    assert scanner.fire("t:1", now=due).stale == 1
    assert recorder.seen == [
        ("scan", None, None),
        ("fired", (1, 0), "t:1"),
        ("fired", (1, 0), "t:2"),
        ("scanned", (2, 2), None),
        ("fired", (0, 1), "t:1"),
    ]


def test_a_scan_that_raises_is_seen_raising() -> None:
    class Down(MemoryStore):
        def due_keys(self, *args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailableError("Redis did not answer (ConnectionError)")

    recorder = Recorder()
    scanner = DueTimerScanner(Down(), {}, observers=(recorder,))
    with pytest.raises(StoreUnavailableError):
        scanner.scan()
    assert recorder.seen == [("scan", None, None), ("scan-failed", None, "StoreUnavailableError")]


def test_an_observers_error_is_logged_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    store, due = _waiting(clock, "t:1", "t:2")
    recorder = Recorder()
    scanner = DueTimerScanner(store, {"timer": T}, now=clock, observers=(Broken(), recorder))
    with caplog.at_level(logging.ERROR, logger="django_xsm.timers"):
        result = scanner.scan(now=due)
    assert (result.scanned, result.fired, result.errors) == (2, 2, 0)
    record = store.load("t:1")
    assert record is not None and record.snapshot["context"]["fired"] == 1
    assert [r.getMessage() for r in caplog.records] == [
        f"scan observer {scanner.observers[0]!r} failed (scan)",
        f"scan observer {scanner.observers[0]!r} failed (t:1)",
        f"scan observer {scanner.observers[0]!r} failed (t:2)",
    ]
    assert recorder.seen[-1] == ("scanned", (2, 2), None)  # the others still see it all


def test_process_observers_reach_every_scanner_unless_it_has_its_own() -> None:
    clock = FakeClock()
    store, due = _waiting(clock, "t:1")
    shared, own = Recorder(), Recorder()
    plain = DueTimerScanner(store, {"timer": T}, now=clock)  # built before the registration
    mine = DueTimerScanner(store, {"timer": T}, now=clock, observers=(own,))
    add_process_observer(shared)
    add_process_observer(shared)  # idempotent
    try:
        assert process_observers() == (shared,)
        plain.scan(now=due)
        mine.scan(now=due)
    finally:
        remove_process_observer(shared)
    assert process_observers() == ()
    assert [s[0] for s in shared.seen] == ["scan", "fired", "scanned"]
    assert [s[0] for s in own.seen] == ["scan", "scanned"]  # t:1 already fired
    with pytest.raises(TypeError):
        add_process_observer(object())  # type: ignore[arg-type]


def test_nobody_observing_costs_a_shared_null_context() -> None:
    assert observed((), lambda o: o.scan(None, ScanResult()), "scan") is NO_OBSERVATION  # type: ignore[arg-type]
