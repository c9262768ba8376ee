"""``xsm``: what the pytest fixture and :class:`~.cases.XsmTestCase` give a test.

::

    def test_an_unpaid_order_is_cancelled_after_an_hour(xsm):
        ...
        assert xsm.advance(3600) == 1          # the hour-long timer fired
        xsm.emitted                            # what commits emitted
        xsm.deliver()                          # the outbox handlers ran once
        xsm.history("order:1")                 # the transition log

:class:`Xsm` holds, for one test, a namespace of its own
(:mod:`.namespace`), django-xsm's clock standing still until
:meth:`Xsm.advance` moves it (:mod:`.clock`), and on-commit callbacks run
as in production (:mod:`.commits`). It is process-wide while it runs (the
settings and the clock are), so one runs at a time.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django_xsm import backend, conf
from django_xsm.backend.build import get_outbox
from django_xsm.exceptions import InvalidConfigError
from django_xsm.outbox import OutboxWorker, WorkResult, drain
from django_xsm.persistence.base import system_clock_ms
from django_xsm.persistence.outbox import OutboxEntry, OutboxLease
from django_xsm.persistence.records import TransitionRecord
from django_xsm.registry import machines

from .clock import TestClock, milliseconds
from .commits import CommitCallbacks
from .namespace import TestNamespace, require_django_xsm

__all__ = ["EmittedEvent", "Xsm"]

#: Due instances fired per scanner pass.
_SCAN_PAGE = 1000
#: Passes in a row at one time before advance() calls it a loop.
_SAME_TIME_PASSES = 100
#: Outbox entries read per kind (pending, waiting, dead) when looking.
_MOST_ENTRIES = 10_000
_DEAD_PAGE = 500
#: The consumer name deliveries run under.
CONSUMER = "xsm-test"

_active: Xsm | None = None


@dataclass(frozen=True, slots=True)
class EmittedEvent:
    """One event a commit emitted: its ``type`` and ``payload`` (the event
    without its type), the instance ``key`` and ``machine`` (id) that
    emitted it, the ``delivery_id`` handlers get, and the ``version`` the
    emitting commit produced."""

    type: str
    payload: dict[str, Any]
    key: str
    machine: str
    delivery_id: str
    version: int

    @classmethod
    def of(cls, entry: OutboxEntry) -> EmittedEvent:
        payload = {k: v for k, v in dict(entry.event).items() if k != "type"}
        return cls(
            entry.event_type, payload, entry.key, entry.machine, entry.delivery_id, entry.version
        )


class _RecordingWorker(OutboxWorker):
    """The settings' worker, telling the helper each entry it takes (an
    acknowledged entry leaves the outbox: this is how ``emitted`` still
    lists what a delivery emitted and delivered in one go)."""

    seen: Callable[[OutboxEntry], None]

    def handle(self, lease: OutboxLease, result: WorkResult) -> str | None:
        self.seen(lease.entry)
        return super().handle(lease, result)


class Xsm:
    """One test's django-xsm: see the module docstring. :meth:`start` and
    :meth:`stop` (or ``with Xsm() as xsm:``) bracket the test; the fixture
    and :class:`~.cases.XsmTestCase` do it for you. ``settings``:
    pytest-django's ``settings`` fixture, which then carries the test's
    ``XSM`` and puts the project's back after the test (the fixture passes
    it)."""

    def __init__(self, *, settings: Any = None) -> None:
        self._settings = settings
        self._namespace: TestNamespace | None = None
        self._clock: TestClock | None = None
        self._commits = CommitCallbacks()
        self._seen: dict[str, tuple[int, int, OutboxEntry]] = {}

    # --- the test's bracket ------------------------------------------------------------

    def start(self) -> Xsm:
        """Switch to the test's namespace and clock. Refused without Django
        configured, without ``django_xsm`` in ``INSTALLED_APPS``, and while
        another helper runs."""
        global _active
        if _active is not None:
            raise InvalidConfigError(
                "another xsm helper is running (the settings and the clock are process-wide)",
                path="xsm",
                hint="use one xsm fixture, or one XsmTestCase, per test",
            )
        require_django_xsm()
        namespace = TestNamespace(self._settings)
        clock = TestClock(system_clock_ms())
        namespace.enter()
        try:
            backend.use_clock(clock)
            self._commits.start()
        except BaseException:
            backend.use_clock(None)
            namespace.leave()
            raise
        self._namespace, self._clock, self._seen = namespace, clock, {}
        _active = self
        return self

    def stop(self) -> None:
        """Erase the namespace (on a real Redis), put the project's settings
        and the wall clock back. Safe to call twice."""
        global _active
        namespace, self._namespace = self._namespace, None
        if namespace is None:
            return
        try:
            self._commits.stop()
            namespace.leave()
        finally:
            backend.use_clock(None)
            if _active is self:
                _active = None

    def __enter__(self) -> Xsm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _running(self) -> TestClock:
        if self._clock is None or self._namespace is None:
            raise InvalidConfigError(
                "this xsm helper is not running",
                path="xsm",
                hint="use it inside the test that received it (or call start())",
            )
        return self._clock

    # --- what it is ----------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The test's ``XSM['PREFIX']``."""
        self._running()
        assert self._namespace is not None
        return self._namespace.prefix

    @property
    def clock(self) -> TestClock:
        """django-xsm's clock for this test (epoch ms)."""
        return self._running()

    @property
    def now(self) -> _dt.datetime:
        """The clock's time as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self._running().now_ms / 1000, tz=_dt.UTC)

    # --- time ---------------------------------------------------------------------------

    def advance(self, seconds: float) -> int:
        """Move django-xsm's clock ``seconds`` forward and fire every timer
        that comes due on the way, in time order, through the timer scanner
        (``xsm_scan_timers``' path: the same commit script, fencing and
        once-per-entry guarantee); returns how many fired. A timer a fire
        arms is fired too when it comes due before the end; a fire that
        raises is retried on the ``TIMERS`` policy on the moving clock.
        Nothing sleeps."""
        clock = self._running()
        target = clock.later(milliseconds(seconds))  # checked before anything fires
        scanner = backend.get_scanner(machines)
        start, fired, same_time = clock.now_ms, 0, 0
        while True:
            due = scanner.due(target, limit=1)
            if not due:
                break
            at = max(clock.now_ms, due[0][1])
            same_time = same_time + 1 if at == clock.now_ms else 0
            if same_time > _SAME_TIME_PASSES:
                raise InvalidConfigError(
                    f"timers kept firing at {at} ms without the clock moving "
                    f"({_SAME_TIME_PASSES} passes)",
                    path="after",
                    hint="a state whose after of 0 re-enters itself fires forever",
                )
            clock.move_to(at)
            result = scanner.scan(limit=_SCAN_PAGE)
            fired += result.fired
            if not (result.fired or result.errors or result.dead_lettered):
                break  # due but not firing (a lock held): what remains fires at the end
        clock.move_to(target)
        if clock.now_ms != start:
            fired += scanner.scan(limit=_SCAN_PAGE).fired
        return fired

    # --- the outbox ----------------------------------------------------------------------

    def _remember(self, entry: OutboxEntry) -> None:
        if entry.delivery_id and entry.delivery_id not in self._seen:
            self._seen[entry.delivery_id] = (entry.emitted_ms, len(self._seen), entry)

    def _look(self) -> None:
        """Remember every entry the outbox holds now (waiting for delivery,
        for a retry, or dead)."""
        outbox = get_outbox()
        for entry, _consumer, _idle in outbox.pending(limit=_MOST_ENTRIES):
            self._remember(entry)
        for entry, _due in outbox.waiting(limit=_MOST_ENTRIES):
            self._remember(entry)
        after = ""
        while True:
            page = outbox.dead_letters(limit=_DEAD_PAGE, after=after)
            for letter in page:
                self._remember(letter.entry)
            if len(page) < _DEAD_PAGE:
                break
            after = page[-1].cursor

    @property
    def emitted(self) -> list[EmittedEvent]:
        """Every event emitted since the test began, oldest first, delivered
        or not (deliveries made with :meth:`deliver`)."""
        self._running()
        self._look()
        return [EmittedEvent.of(e) for _, _, e in sorted(self._seen.values(), key=_order)]

    def deliver(self) -> WorkResult:
        """Run the configured outbox handlers once for what is pending, as
        ``xsm_run_outbox --once`` does: each handler failure is retried or
        dead-lettered by ``XSM['OUTBOX']``'s policy, retries falling due by
        this test's clock (:meth:`advance` brings them back). Returns the
        counts (``delivered``, ``retried``, ``dead_lettered``...)."""
        self._running()
        self._look()
        worker = _RecordingWorker.from_settings(consumer=CONSUMER)
        assert isinstance(worker, _RecordingWorker)
        worker.seen = self._remember
        return drain(worker)

    # --- the log -------------------------------------------------------------------------

    def history(self, key: str) -> list[TransitionRecord]:
        """The transition records of instance ``key``, oldest first."""
        self._running()
        if not conf.get_settings().audit.enabled:
            raise InvalidConfigError(
                "no transition log is kept: XSM['AUDIT']['ENABLED'] is False",
                path="XSM['AUDIT']['ENABLED']",
                hint="leave the audit on in the test settings to read history()",
            )
        return backend.get_log().read(key)

    def __repr__(self) -> str:
        if self._namespace is None or self._clock is None:
            return "<Xsm (not running)>"
        return f"<Xsm {self._namespace.prefix!r} at {self._clock.now_ms} ms>"


def _order(item: tuple[int, int, OutboxEntry]) -> tuple[int, int]:
    return item[0], item[1]
