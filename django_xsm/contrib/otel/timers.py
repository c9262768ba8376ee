"""Spans and metrics of the due-timer scanner (``DueTimerScanner``).

:func:`instrument_scanner` gives one scanner a :class:`TimerObserver`
(the scanner's ``observers``: it sees each ``scan`` and each ``fire``, and
``scan`` fires through ``fire``, so every fire is seen once) and its blocks
the plugin; ``instrument()`` registers one for every scanner of the
process (``manage.py xsm_scan_timers`` builds its own scanner). The spans
``xsm.timer.scan`` / ``xsm.timer.fire`` and the metrics ``xsm.timer.fires``,
``xsm.timer.lag`` and ``xsm.dead_letters``: docs/observability.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry.trace import SpanKind

from django_xsm.persistence import DueTimerScanner, ScanResult
from django_xsm.persistence.timers import ScanObserver, observers_of

from . import telemetry as t
from .plugin import OtelPlugin, default_plugin

__all__ = ["TimerObserver", "instrument_scanner"]


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


class TimerObserver(ScanObserver):
    """The spans and metrics of a scanner's scans and fires, on
    ``plugin``'s providers."""

    def __init__(self, plugin: OtelPlugin) -> None:
        self.plugin = plugin

    @contextlib.contextmanager
    def scan(self, scanner: DueTimerScanner, result: ScanResult) -> Iterator[None]:
        with self.plugin.telemetry.tracer.start_as_current_span(
            "xsm.timer.scan", kind=SpanKind.INTERNAL
        ) as span:
            yield  # an exception is recorded by the span (status ERROR)
            span.set_attributes(_result_attributes(result))

    @contextlib.contextmanager
    def fire(self, scanner: DueTimerScanner, key: str, result: ScanResult) -> Iterator[None]:
        with self.plugin.telemetry.tracer.start_as_current_span(
            "xsm.timer.fire", kind=SpanKind.INTERNAL, attributes={t.KEY: key}
        ) as span:
            yield
            span.set_attributes(_result_attributes(result))
            _record(self.plugin, result)


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
    if not any(isinstance(o, TimerObserver) for o in observers_of(scanner.observers)):
        scanner.observers = (*scanner.observers, TimerObserver(plugin))  # else observed already
    _with_plugin(scanner, plugin)
    return scanner
