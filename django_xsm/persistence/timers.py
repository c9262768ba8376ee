"""DueTimerScanner: fires durable ``after`` deadlines (docs/persistence.md,
"Durable timers").

A scan asks the store for keys due now, opens each in a ``persisted()``
block (create=False) and sends the ``xstate.after.*`` event of every due
deadline, oldest first. The commit is fenced by the version loaded and the
engine only accepts an after-event while its state entry still holds the
deadline, so a deadline fires at most once per state entry, never before
its due time, with any number of scanners. A fire that raises backs off,
then is dead-lettered; one poisoned instance never stops a scan.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from django_xsm.engine import Deadline
from django_xsm.exceptions import (
    ConflictError,
    InstanceNotFoundError,
    InvalidConfigError,
    LockTimeoutError,
    StoreUnavailableError,
    UnknownMachineError,
)

from .arguments import validate_text
from .backoff import Backoff
from .block import persisted
from .locks import LockStrategy
from .observers import NO_OBSERVATION, Registry
from .observers import observed as _observed
from .records import StoredRecord, TimerFailure
from .timer_state import INSTANCE_FAILURE, failure_key, next_due_ms

__all__ = [
    "DueTimerScanner",
    "ScanObserver",
    "ScanResult",
    "add_process_observer",
    "process_observers",
    "remove_process_observer",
]

logger = logging.getLogger("django_xsm.timers")

TIMER_ACTOR = "xsm:timer"


class ScanObserver:
    """Base for observers of a due-timer scanner: synchronous, no I/O
    expected. Each hook returns a context manager the scanner enters
    before the work and exits with the exception that ended it; ``result``
    is the :class:`~django_xsm.persistence.ScanResult` the work fills,
    final when the context exits without an exception."""

    def scan(self, scanner: DueTimerScanner, result: ScanResult) -> AbstractContextManager[None]:
        """Around one ``scan()``: the due keys' query and a ``fire`` per
        due key."""
        return NO_OBSERVATION

    def fire(
        self, scanner: DueTimerScanner, key: str, result: ScanResult
    ) -> AbstractContextManager[None]:
        """Around the fire of ``key`` (inside the scan's context when the
        scan fires it): its block and the bookkeeping of a failure."""
        return NO_OBSERVATION


_PROCESS: Registry[ScanObserver] = Registry(ScanObserver)

# What every scanner gets besides its own (see Registry); tracing adds one.
add_process_observer = _PROCESS.add
remove_process_observer = _PROCESS.remove
process_observers = _PROCESS.registered
observers_of = _PROCESS.joined


def observed(
    observers: tuple[ScanObserver, ...],
    hook: Callable[[ScanObserver], AbstractContextManager[None]],
    what: str,
) -> AbstractContextManager[None]:
    """What a scanner enters around ``what`` (``"scan"``, or the key fired;
    ``hook``: the observer's method to call): a shared null context when
    there is no observer."""
    return _observed(observers, hook, logger, "scan observer", what)


@dataclass(slots=True)
class ScanResult:
    """Counts of one scan. ``max_lag_ms``: the latest fire after its due time.
    ``errors``: fires that raised; ``unavailable``: passes the store could
    not be reached (the daemon waits those out; they are not errors)."""

    scanned: int = 0
    fired: int = 0
    stale: int = 0
    locked: int = 0
    errors: int = 0
    dead_lettered: int = 0
    max_lag_ms: int = 0
    unavailable: int = 0
    failed_keys: list[str] = field(default_factory=list)

    def merge(self, other: ScanResult) -> None:
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_lag_ms = max(self.max_lag_ms, other.max_lag_ms)
        self.failed_keys.extend(other.failed_keys)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in (*_COUNTS, "max_lag_ms")}


#: The counts of a :class:`ScanResult` that add up when results merge.
_COUNTS = ("scanned", "fired", "stale", "locked", "dead_lettered", "errors", "unavailable")


class DueTimerScanner:
    """Fire due deadlines of every instance in ``store``.

    ``machines``: machine id -> machine (the record names its machine).
    ``plugins``/``lock``: as for ``persisted()`` (audit the fires, lock
    pessimistically...). ``now``: a clock returning epoch milliseconds
    (tests inject one). ``max_attempts``, ``backoff_s``, ``max_backoff_s``,
    ``jitter``, ``rng``: retry policy for fires that raise
    (:class:`~django_xsm.persistence.backoff.Backoff`). ``key_prefix``: only
    keys starting with it (literally) are scanned and fired. ``observers``:
    what sees each scan and fire (:class:`ScanObserver`), besides the
    process's. A due key whose record cannot be read at all is parked
    (``store.park``) so no scan reads it again until it is repaired or
    forgotten.
    """

    def __init__(
        self,
        store: Any,
        machines: Mapping[str, Any],
        *,
        plugins: Any = (),
        lock: LockStrategy | None = None,
        now: Callable[[], int] | None = None,
        max_attempts: int = 10,
        backoff_s: float = 1.0,
        max_backoff_s: float = 300.0,
        actor: str = TIMER_ACTOR,
        key_prefix: str = "",
        jitter: bool = True,
        rng: random.Random | None = None,
        observers: tuple[ScanObserver, ...] = (),
    ) -> None:
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise InvalidConfigError("max_attempts must be an int >= 1", path="max_attempts")
        self.key_prefix = validate_text(key_prefix, "key_prefix") or ""
        self.store = store
        self.machines = dict(machines)
        self.plugins = tuple(plugins or ())
        self.lock = lock
        self.clock: Callable[[], int] = now or store.clock
        self.max_attempts = max_attempts
        self.backoff = Backoff(backoff_s, max_backoff_s, jitter, rng or random.Random())
        self.actor = actor
        self.observers = tuple(observers)

    def _machine_for(self, record: StoredRecord | None) -> Any:
        machine_id = record.owner if record is not None else ""
        try:
            return self.machines[machine_id]
        except KeyError:
            raise UnknownMachineError(machine_id, known=tuple(self.machines)) from None

    def due(self, now: int | None = None, *, limit: int = 100) -> list[tuple[str, int]]:
        """What a scan would look at (``--dry-run``): ``(key, due_ms)``."""
        now_ms = self.clock() if now is None else now
        return self._due_keys(now_ms, limit)

    def _due_keys(self, now_ms: int, limit: int) -> list[tuple[str, int]]:
        return list(self.store.due_keys(now_ms / 1000.0, limit=limit, prefix=self.key_prefix))

    def scan(self, now: int | None = None, *, limit: int = 100) -> ScanResult:
        """One pass over up to ``limit`` due keys; ``now`` in epoch ms."""
        result = ScanResult()
        with observed(observers_of(self.observers), lambda o: o.scan(self, result), "scan"):
            now_ms = self.clock() if now is None else now
            for key, _due in self._due_keys(now_ms, limit):
                result.scanned += 1
                result.merge(self.fire(key, now=now_ms))
        return result

    def fire(
        self,
        key: str,
        *,
        now: int | None = None,
        force: bool = False,
        actor: str | None = None,
    ) -> ScanResult:
        """Fire the due deadlines of one instance. ``force`` fires every
        armed deadline, dead-lettered and not-yet-due ones included (the
        operator's "fire now"); ``actor`` replaces the scanner's actor in
        the transition log (the operator's name)."""
        result = ScanResult()
        with observed(observers_of(self.observers), lambda o: o.fire(self, key, result), key):
            self._fire(key, now, force, actor, result)
        return result

    def _fire(
        self, key: str, now: int | None, force: bool, actor: str | None, result: ScanResult
    ) -> None:
        if not key.startswith(self.key_prefix):
            raise InvalidConfigError(
                f"{key!r} is outside this scanner's key_prefix {self.key_prefix!r}",
                path="key",
                hint="fire it with a scanner for its prefix",
            )
        now_ms = self.clock() if now is None else now
        version = 0
        failures: dict[str, TimerFailure] = {}
        firing: Any = None
        deadlines: tuple[Any, ...] = ()
        try:
            with persisted(
                self.store,
                key,
                self._machine_for,
                plugins=self.plugins,
                lock=self.lock,
                create=False,
                actor=self.actor if actor is None else actor,
                # deadlines re-armed by this fire count from the scan's now
                clock=lambda: now_ms,
            ) as block:
                version = block.version
                failures = dict(block.record.timer_failures) if block.record else {}
                deadlines = tuple(block.deadlines)
                due = sorted(
                    (d for d in deadlines if force or self._ready(d, failures, now_ms)),
                    key=lambda d: (d.due_ms, d.entry),
                )
                if not due:
                    result.stale += 1
                    return
                fired, lag = 0, 0
                for deadline in due:
                    firing = deadline
                    receipt = block.send_reserved(deadline.event_type, reason="timer")
                    if receipt.accepted:
                        fired += 1
                        lag = max(lag, now_ms - deadline.due_ms)
                # A commit that fails (a context the codec refuses, a snapshot
                # over the size limit) is the first fire's failure: it backs
                # off and dead-letters like one instead of failing every scan.
                firing = due[0]
            # Counted only once the fires are durable: a commit that lost to
            # another scanner is stale, not fired.
            result.fired += fired
            result.max_lag_ms = max(result.max_lag_ms, lag)
        except (ConflictError, InstanceNotFoundError):
            result.stale += 1  # another scanner (or a user event) got there first
        except LockTimeoutError:
            result.locked += 1
        except StoreUnavailableError:
            raise
        except Exception as exc:
            result.errors += 1
            result.failed_keys.append(key)
            if firing is None:  # could not open it (unknown machine, migration...)
                self._record_open_failure(key, exc, now_ms, result)
            else:
                fk = failure_key(firing)
                self._record_failure(key, version, failures, deadlines, fk, exc, now_ms, result)

    @staticmethod
    def _ready(deadline: Any, failures: Mapping[str, TimerFailure], now_ms: int) -> bool:
        if deadline.due_ms > now_ms:
            return False
        for failure in (failures.get(INSTANCE_FAILURE), failures.get(failure_key(deadline))):
            if failure is not None and (failure.dead or failure.next_attempt_ms > now_ms):
                return False
        return True

    def _record_open_failure(
        self, key: str, exc: BaseException, now_ms: int, result: ScanResult
    ) -> None:
        """Back the whole instance off, so keys that cannot be opened do not
        sit at the head of the due index and starve every other timer."""
        try:
            record = self.store.load(key)
            deadlines = _deadlines_of(record) if record is not None else ()
        except StoreUnavailableError:
            raise
        except Exception as load_exc:  # unreadable: nothing to fence bookkeeping on
            self._park(key, load_exc, result)
            return
        if record is None:
            return
        failures = dict(record.timer_failures)
        self._record_failure(
            key, record.version, failures, deadlines, INSTANCE_FAILURE, exc, now_ms, result
        )

    def _park(self, key: str, exc: BaseException, result: ScanResult) -> None:
        """Dead-letter a record no scan can read, so scans stop re-reading it."""
        reason = f"{type(exc).__name__}: {exc}"[:500]
        try:
            parked = self.store.park(key, reason=reason)
        except StoreUnavailableError:
            logger.warning("could not park the unreadable record of %r", key)
            return
        if parked:
            result.dead_lettered += 1
            logger.warning("xsm timer scan parked the unreadable record of %r: %s", key, reason)

    def _record_failure(
        self,
        key: str,
        version: int,
        failures: dict[str, TimerFailure],
        deadlines: tuple[Any, ...],
        fk: str,
        exc: BaseException,
        now_ms: int,
        result: ScanResult,
    ) -> None:
        previous = failures.get(fk)
        attempts = (previous.attempts if previous else 0) + 1
        dead = attempts >= self.max_attempts
        delay = self.backoff.delay_ms(attempts)
        failures[fk] = TimerFailure(
            attempts=attempts,
            next_attempt_ms=now_ms + delay,
            dead=dead,
            error=f"{type(exc).__name__}: {exc}"[:500],
        )
        if dead:
            result.dead_lettered += 1
        logger.warning(
            "xsm timer %s of %r failed (attempt %d/%d%s): %s",
            "open" if fk == INSTANCE_FAILURE else fk.partition(":")[2],
            key,
            attempts,
            self.max_attempts,
            ", dead-lettered" if dead else "",
            exc,
        )
        try:
            self.store.record_timer_failure(
                key,
                expected_version=version,
                failures=failures,
                next_due_ms=next_due_ms(deadlines, failures),
            )
        except StoreUnavailableError:
            logger.warning("could not record the timer failure of %r", key)

    def redrive(self, key: str) -> bool:
        """Give the dead-lettered timers of ``key`` their attempts back, so
        the next scan fires them again (their deadlines are still armed;
        a parked, unreadable record is not a timer failure: repair or
        forget it). False when ``key`` had no dead timer, or changed while
        this ran (then try again)."""
        record = self.store.load(key)
        if record is None:
            return False
        failures = dict(record.timer_failures)
        dead = [fk for fk, failure in failures.items() if failure.dead]
        if not dead:
            return False
        for fk in dead:
            del failures[fk]
        redriven = bool(
            self.store.record_timer_failure(
                key,
                expected_version=record.version,
                failures=failures,
                next_due_ms=next_due_ms(_deadlines_of(record), failures),
            )
        )
        if redriven:
            logger.warning("xsm timers of %r redriven: %s", key, ", ".join(sorted(dead)))
        return redriven

    def run_forever(
        self,
        interval: float = 1.0,
        *,
        stop: threading.Event | Callable[[], bool] | None = None,
        limit: int = 100,
        on_scan: Callable[[ScanResult], None] | None = None,
    ) -> ScanResult:
        """Scan every ``interval`` seconds until ``stop`` is set (an Event
        or a callable returning True). A full page is followed by another
        scan at once. Store outages are logged and waited out. Returns the
        totals."""
        total = ScanResult()
        event = stop if isinstance(stop, threading.Event) else None
        should_stop: Callable[[], bool] = (
            event.is_set if event is not None else (stop or (lambda: False))  # type: ignore[assignment]
        )
        while not should_stop():
            try:
                result = self.scan(limit=limit)
            except StoreUnavailableError as exc:
                logger.warning("xsm timer scan: store unavailable (%s)", exc.cause or exc)
                result = ScanResult(unavailable=1)
            total.merge(result)
            if on_scan is not None:
                on_scan(result)
            # A full page that made progress may hide more due keys: scan
            # again at once. A full page of locked or failing keys must not
            # spin, so it waits like any other pass.
            if result.scanned >= limit and (result.fired or result.stale):
                continue
            if event is not None:
                event.wait(interval)
            else:
                time.sleep(interval)
        return total


def _deadlines_of(record: StoredRecord) -> tuple[Deadline, ...]:
    """The deadlines armed in ``record``'s snapshot (raises for damaged ones)."""
    return tuple(Deadline.from_dict(d) for d in record.snapshot.get("deadlines", ()))
