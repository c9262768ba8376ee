"""Metrics of the outbox's delivery side (an ``OutboxReader``).

Every worker, whatever its loop, takes leases with ``take()`` and ends each
with ``ack()`` / ``ack_many()`` or ``fail()``; the reader tells its
observers. :func:`instrument_outbox` gives one reader an
:class:`OutboxMetrics` observer, ``instrument()`` registers one for every
reader of the process (a worker may build its own reader). The metrics
``xsm.outbox.lag`` (by the Redis server's clock against this process's),
``xsm.outbox.deliveries`` and ``xsm.dead_letters``: docs/observability.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from django_xsm.persistence.outbox import OutboxLease, OutboxObserver, OutboxReader, observers_of

from . import telemetry as t
from .plugin import OtelPlugin, default_plugin

__all__ = ["OutboxMetrics", "instrument_outbox"]


class OutboxMetrics(OutboxObserver):
    """The metrics of a reader's leases, on ``plugin``'s providers."""

    def __init__(self, plugin: OtelPlugin) -> None:
        self.plugin = plugin

    def taken(self, outbox: Any, leases: Sequence[OutboxLease]) -> None:
        telemetry = self.plugin.telemetry
        now_ms = int(time.time() * 1000)
        lag = telemetry.instruments.outbox_lag
        for lease in leases:
            entry = lease.entry
            if entry.emitted_ms > 0:
                lag.record(
                    max(0, now_ms - entry.emitted_ms),
                    t.labels(telemetry.machine(entry.machine), {t.EVENT: entry.event_type}),
                )

    def ended(self, outbox: Any, lease: OutboxLease, outcome: str) -> None:
        telemetry = self.plugin.telemetry
        entry = lease.entry
        labels = t.labels(
            telemetry.machine(entry.machine), {t.OUTCOME: outcome, t.EVENT: entry.event_type}
        )
        telemetry.instruments.outbox_deliveries.add(1, labels)
        if outcome == "dead":
            telemetry.instruments.dead_letters.add(1, {t.SOURCE: "outbox"})


def instrument_outbox(outbox: OutboxReader, plugin: OtelPlugin | None = None) -> OutboxReader:
    """Measure ``outbox``'s deliveries (idempotent); returns it. ``plugin``:
    as for :func:`~django_xsm.contrib.otel.instrument_scanner`."""
    if not isinstance(outbox, OutboxReader):
        raise TypeError(
            f"instrument_outbox() needs an OutboxReader (store.outbox, get_outbox()), "
            f"got {type(outbox).__name__}"
        )
    if not any(isinstance(o, OutboxMetrics) for o in observers_of(outbox.observers)):
        outbox.observers = (*outbox.observers, OutboxMetrics(plugin or default_plugin()))
    return outbox
