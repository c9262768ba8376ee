"""OpenTelemetry traces and metrics for django-xsm (extra ``otel``).

::

    # once per process, e.g. in AppConfig.ready() or wsgi.py / asgi.py,
    # after the OpenTelemetry SDK (or a distro) set up its providers
    from django_xsm.contrib import otel
    otel.instrument()

``instrument()`` gives every block of the process an :class:`OtelPlugin`
and measures every ``DueTimerScanner`` and outbox reader; without it, pass
the plugin, ``instrument_scanner()`` and ``instrument_outbox()`` where you
want them. Only this package imports ``opentelemetry``
(``opentelemetry-api``; the SDK is the application's choice). Set-up, span
and metric names: docs/observability.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django_xsm.contrib import missing_extra

try:
    from opentelemetry import metrics, trace
except ImportError as exc:
    missing_extra(
        exc, "otel", extra="otel", module="opentelemetry.trace", distribution="opentelemetry-api"
    )

from django_xsm.persistence.block import add_process_plugin, remove_process_plugin
from django_xsm.persistence.outbox import add_process_observer as add_outbox_observer
from django_xsm.persistence.outbox import remove_process_observer as remove_outbox_observer
from django_xsm.persistence.timers import add_process_observer as add_scan_observer
from django_xsm.persistence.timers import remove_process_observer as remove_scan_observer

from .outbox import OutboxMetrics, instrument_outbox
from .plugin import OtelPlugin
from .telemetry import METER_NAME, TRACER_NAME
from .timers import TimerObserver, instrument_scanner

__all__ = [
    "METER_NAME",
    "TRACER_NAME",
    "OtelPlugin",
    "instrument",
    "instrument_outbox",
    "instrument_scanner",
    "instrumented",
    "uninstrument",
]

_lock = threading.Lock()
_installed: OtelPlugin | None = None
_observers: tuple[TimerObserver, OutboxMetrics] | None = None


def _registry_name(machine_id: str) -> str | None:
    from django_xsm.registry import machines

    return machines.name_for_machine_id(machine_id)


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    machine_name: Callable[[str], str | None] | None = None,
) -> OtelPlugin:
    """Trace and measure every block, timer scanner and outbox of the
    process; returns the plugin (the same one on later calls, whose
    arguments are then ignored). ``machine_name``: machine id -> reported
    name, default the registry's name (``XSM['MACHINES']``)."""
    global _installed, _observers
    with _lock:
        if _installed is None:
            plugin = OtelPlugin(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                machine_name=machine_name or _registry_name,
            )
            _observers = (TimerObserver(plugin), OutboxMetrics(plugin))
            add_process_plugin(plugin)
            add_scan_observer(_observers[0])
            add_outbox_observer(_observers[1])
            _installed = plugin
        return _installed


def instrumented() -> OtelPlugin | None:
    """The plugin :func:`instrument` installed, or None."""
    return _installed


def uninstrument() -> None:
    """Undo :func:`instrument`: new blocks, scanners and outboxes are no
    longer observed (plugins passed explicitly keep working)."""
    global _installed, _observers
    with _lock:
        if _installed is not None:
            remove_process_plugin(_installed)
        if _observers is not None:
            remove_scan_observer(_observers[0])
            remove_outbox_observer(_observers[1])
        _installed = _observers = None
