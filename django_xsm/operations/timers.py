"""Due timers: what is due, what is dead-lettered, one scan and the scan loop
(``xsm_scan_timers`` and the admin's "fire timers now")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django_xsm import backend
from django_xsm.exceptions import StoreError
from django_xsm.persistence.timers import DueTimerScanner, ScanResult
from django_xsm.registry import MachineEntry, machines

from .instances import iso

__all__ = [
    "MAX_DUE_FETCH",
    "DueTimer",
    "LoopResult",
    "dead_letter_reasons",
    "dead_letters",
    "due_timers",
    "machine_entry",
    "redrive_timers",
    "run_scanner",
    "scan_timers",
]

logger = logging.getLogger("django_xsm.commands")

#: With ``machine=``, at most this many due keys are read to find ``limit``
#: of that machine's (the due index is shared by every machine).
MAX_DUE_FETCH = 10_000


def machine_entry(name: str | None) -> MachineEntry | None:
    """The registered machine ``name`` (None for every machine).

    ``UnknownMachineError`` lists the registered names;
    ``ImproperlyConfigured`` for one that failed to load."""
    return None if name is None else machines[name]


def _owner_name(machine_ids: Mapping[str, str], key: str) -> str:
    # The registered name, or the stored id of a machine no longer configured.
    machine_id = machine_ids.get(key, "")
    return machines.name_for_machine_id(machine_id, machine_id)


# --- timers -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DueTimer:
    """One instance with a deadline due: its ``machine`` (registry name, or
    the stored machine id when it is not configured), the earliest due time
    and how late it is (``lag_ms``)."""

    key: str
    machine: str
    due_ms: int
    lag_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "machine": self.machine,
            "due_at": iso(self.due_ms),
            "lag_ms": self.lag_ms,
        }


@dataclass(frozen=True, slots=True)
class LoopResult:
    """Totals of :func:`run_scanner` over ``passes`` scans."""

    total: ScanResult
    passes: int


def _due(
    scanner: DueTimerScanner, entry: MachineEntry | None, now: int, limit: int, *, ids: bool
) -> tuple[list[tuple[str, int]], dict[str, str]]:
    fetch = limit
    while True:
        rows = scanner.due(now, limit=fetch)
        found = scanner.store.machine_ids([k for k, _ in rows]) if ids or entry else {}
        if entry is None:
            return rows, found
        mine = [(k, d) for k, d in rows if found.get(k) == entry.machine.id]
        if len(mine) >= limit or len(rows) < fetch or fetch >= MAX_DUE_FETCH:
            return mine[:limit], found
        fetch = min(fetch * 4, MAX_DUE_FETCH)


def due_timers(
    *,
    machine: str | None = None,
    limit: int = 100,
    scanner: DueTimerScanner | None = None,
    key_prefix: str = "",
) -> list[DueTimer]:
    """What a scan would fire now (``xsm_scan_timers --dry-run``), earliest
    first; fires nothing."""
    entry = machine_entry(machine)
    scanner = scanner or backend.get_scanner(machines, key_prefix=key_prefix)
    now = scanner.clock()
    rows, found = _due(scanner, entry, now, limit, ids=True)
    return [DueTimer(k, _owner_name(found, k), d, now - d) for k, d in rows]


def dead_letters(
    *, machine: str | None = None, limit: int = 100, key_prefix: str = ""
) -> list[tuple[str, str, int]]:
    """Instances with dead-lettered timers, oldest first: ``(key,
    machine, parked at ms)``. Scans skip them until their state changes or
    they are fired by hand (``DueTimerScanner.fire(key, force=True)``);
    :func:`dead_letter_reasons` says why each was parked."""
    entry = machine_entry(machine)
    store = backend.get_store()
    wide = entry is not None or bool(key_prefix)
    rows = store.dead_letters(limit=MAX_DUE_FETCH if wide else limit)
    rows = [(k, t) for k, t in rows if k.startswith(key_prefix)]
    found = store.machine_ids([k for k, _ in rows])
    if entry is not None:
        rows = [(k, t) for k, t in rows if found.get(k) == entry.machine.id]
    return [(k, _owner_name(found, k), t) for k, t in rows[:limit]]


def dead_letter_reasons(keys: list[str]) -> dict[str, str]:
    """Why each of ``keys`` was parked: its last timer failure, or why the
    scanner could not read its record (keys with no reason are left out)."""
    return dict(backend.get_store().dead_letter_reasons(keys))


def redrive_timers(keys: list[str]) -> dict[str, bool]:
    """Give the dead-lettered timers of ``keys`` their attempts back
    (``xsm_scan_timers --redrive``): the next scan fires them again. Maps
    each key to whether it had a dead timer that was redriven."""
    scanner = backend.get_scanner(machines)
    return {key: scanner.redrive(key) for key in dict.fromkeys(keys)}


def scan_timers(
    *,
    machine: str | None = None,
    limit: int = 1000,
    lock: str | None = None,
    stop: threading.Event | None = None,
    on_fire: Callable[[str, ScanResult], None] | None = None,
    scanner: DueTimerScanner | None = None,
    key_prefix: str = "",
) -> ScanResult:
    """One pass: fire the due deadlines of up to ``limit`` instances (of
    ``machine`` only, when given), earliest first. Stops between two
    instances once ``stop`` is set. ``on_fire(key, outcome)`` is called per
    instance. Each deadline fires at most once however many scanners run
    (``DueTimerScanner.fire``); ``StoreUnavailableError`` propagates."""
    entry = machine_entry(machine)
    scanner = scanner or backend.get_scanner(machines, lock=lock, key_prefix=key_prefix)
    result = ScanResult()
    rows, _ = _due(scanner, entry, scanner.clock(), limit, ids=False)
    for key, _due_ms in rows:
        if stop is not None and stop.is_set():
            break
        outcome = scanner.fire(key)
        result.scanned += 1
        result.merge(outcome)
        if on_fire is not None:
            on_fire(key, outcome)
    return result


def run_scanner(
    *,
    stop: threading.Event,
    interval_s: float = 1.0,
    machine: str | None = None,
    limit: int = 1000,
    lock: str | None = None,
    on_pass: Callable[[ScanResult, str | None], None] | None = None,
    on_fire: Callable[[str, ScanResult], None] | None = None,
    key_prefix: str = "",
) -> LoopResult:
    """Scan every ``interval_s`` seconds until ``stop`` is set (the daemon).

    A pass that filled its ``limit`` and fired something is followed by
    another at once. A store error (Redis down, a damaged index) is passed
    to ``on_pass(result, message)`` and waited out; ``stop`` is honoured
    between instances and during the wait.
    """
    machine_entry(machine)  # an unknown name fails now, not on every pass
    total = ScanResult()
    passes = 0
    while not stop.is_set():
        message: str | None = None
        try:
            result = scan_timers(
                machine=machine,
                limit=limit,
                lock=lock,
                stop=stop,
                on_fire=on_fire,
                key_prefix=key_prefix,
            )
        except StoreError as exc:
            if on_pass is None:  # else the caller reports it: one line per pass
                logger.warning("xsm_scan_timers: %s", exc)
            result, message = ScanResult(unavailable=1), exc.message
        passes += 1
        total.merge(result)
        if on_pass is not None:
            on_pass(result, message)
        if message is None and result.scanned >= limit and result.fired:
            continue
        stop.wait(interval_s)
    return LoopResult(total, passes)
