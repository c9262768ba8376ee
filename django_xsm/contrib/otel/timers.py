"""Spans and metrics of the due-timer scanner (``DueTimerScanner``).

:func:`instrument_scanner` wraps one scanner's ``scan`` and ``fire``
(``scan`` calls ``fire`` per due key, so every fire is seen once) and gives
its blocks the plugin; :func:`instrument_class` does the same for every
scanner of the process (``manage.py xsm_scan_timers`` builds its own).

- span ``xsm.timer.scan``: ``xsm.timer.scanned``, ``xsm.timer.fired``,
  ``xsm.timer.stale``, ``xsm.timer.locked``, ``xsm.timer.errors``,
  ``xsm.timer.dead_lettered``, ``xsm.timer.max_lag_ms``;
- span ``xsm.timer.fire`` (a child of the scan, parent of the block's
  ``xsm.open`` / ``xsm.send`` / ``xsm.commit``): ``xsm.key`` and the same
  counts for that key;
- ``xsm.timer.fires`` (by ``xsm.outcome``: fired, stale, locked, error),
  ``xsm.timer.lag`` (ms, ``ScanResult.max_lag_ms`` of each fire that fired),
  ``xsm.dead_letters`` (``xsm.source="timer"``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import SpanKind

from django_xsm.persistence import DueTimerScanner, ScanResult

from . import telemetry as t
from .plugin import OtelPlugin, default_plugin

__all__ = ["instrument_class", "instrument_scanner", "uninstrument_class"]

_lock = threading.Lock()
_originals: dict[str, Any] = {}
_MARK = "_xsm_otel_instrumented"


def _result_attributes(result: ScanResult) -> dict[str, int]:
    return {
        "xsm.timer.scanned": result.scanned,
        "xsm.timer.fired": result.fired,
        "xsm.timer.stale": result.stale,
        "xsm.timer.locked": result.locked,
        "xsm.timer.errors": result.errors,
        "xsm.timer.dead_lettered": result.dead_lettered,
        "xsm.timer.max_lag_ms": result.max_lag_ms,
    }


def _record(plugin: OtelPlugin, result: ScanResult) -> None:
    found = plugin.telemetry.instruments
    for outcome, count in (
        ("fired", result.fired),
        ("stale", result.stale),
        ("locked", result.locked),
        ("error", result.errors),
    ):
        if count:
            found.timer_fires.add(count, {t.OUTCOME: outcome})
    if result.fired:
        found.timer_lag.record(result.max_lag_ms)
    if result.dead_lettered:
        found.dead_letters.add(result.dead_lettered, {t.SOURCE: "timer"})


def _observed(
    plugin: OtelPlugin, name: str, call: Callable[[], ScanResult], key: str = ""
) -> ScanResult:
    attributes = {t.KEY: key} if key else {}
    with plugin.telemetry.tracer.start_as_current_span(
        name, kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        result = call()  # an exception is recorded by the span (status ERROR)
        span.set_attributes(_result_attributes(result))
        if name == "xsm.timer.fire":
            _record(plugin, result)
        return result


def _with_plugin(scanner: DueTimerScanner, plugin: OtelPlugin) -> None:
    if not any(isinstance(p, OtelPlugin) for p in scanner.plugins):
        scanner.plugins = (*scanner.plugins, plugin)


def instrument_scanner(
    scanner: DueTimerScanner, plugin: OtelPlugin | None = None
) -> DueTimerScanner:
    """Trace and measure ``scanner`` (idempotent); returns it. ``plugin``:
    default the one :func:`~django_xsm.contrib.otel.instrument` installed,
    else a new one on the global providers."""
    plugin = plugin or default_plugin()
    if getattr(scanner, _MARK, False) or _originals:
        _with_plugin(scanner, plugin)  # already observed, here or by the class
        return scanner
    fire, scan = scanner.fire, scanner.scan

    @functools.wraps(fire)
    def traced_fire(key: str, **kwargs: Any) -> ScanResult:
        return _observed(plugin, "xsm.timer.fire", lambda: fire(key, **kwargs), key)

    @functools.wraps(scan)
    def traced_scan(*args: Any, **kwargs: Any) -> ScanResult:
        return _observed(plugin, "xsm.timer.scan", lambda: scan(*args, **kwargs))

    for name, method in (("fire", traced_fire), ("scan", traced_scan), (_MARK, True)):
        setattr(scanner, name, method)
    _with_plugin(scanner, plugin)
    return scanner


def instrument_class(plugin: OtelPlugin) -> None:
    """Trace and measure every ``DueTimerScanner`` of the process."""
    with _lock:
        if _originals:
            return
        fire, scan = DueTimerScanner.fire, DueTimerScanner.scan

        @functools.wraps(fire)
        def traced_fire(self: DueTimerScanner, key: str, **kwargs: Any) -> ScanResult:
            # its blocks get the plugin from instrument()'s adoption
            return _observed(plugin, "xsm.timer.fire", lambda: fire(self, key, **kwargs), key)

        @functools.wraps(scan)
        def traced_scan(self: DueTimerScanner, *args: Any, **kwargs: Any) -> ScanResult:
            return _observed(plugin, "xsm.timer.scan", lambda: scan(self, *args, **kwargs))

        _originals.update(fire=fire, scan=scan)
        for name, method in (("fire", traced_fire), ("scan", traced_scan)):
            setattr(DueTimerScanner, name, method)


def uninstrument_class() -> None:
    """Undo :func:`instrument_class`."""
    with _lock:
        for name, original in _originals.items():
            setattr(DueTimerScanner, name, original)
        _originals.clear()
