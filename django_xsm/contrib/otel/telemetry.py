"""The tracer, the meter's instruments and the attribute names, in one place.

Every span and metric of this integration is named here (docs/observability.md
lists them). The tracer and the meter are named ``django_xsm``; they come from
the providers given, else from OpenTelemetry's global ones (which the SDK,
``opentelemetry-instrument`` or a distro configure; without any, the API's
no-op providers make all of this free).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from django_xsm import __version__

__all__ = [
    "METER_NAME",
    "TRACER_NAME",
    "Instruments",
    "Telemetry",
    "compact_json",
    "fail_span",
    "labels",
]

#: The name of the tracer and of the meter (the instrumentation scope).
TRACER_NAME = METER_NAME = "django_xsm"

# span attributes
MACHINE = "xsm.machine"
KEY = "xsm.key"
EVENT = "xsm.event"
FROM = "xsm.from"
TO = "xsm.to"
VERSION = "xsm.version"
GUARD_RESULT = "xsm.guard_result"
REFUSAL_REASON = "xsm.refusal.reason"
REFUSAL_GUARDS = "xsm.refusal.guards"
CHANGED = "xsm.changed"
DUPLICATE = "xsm.duplicate"
CREATED = "xsm.created"
LOCK = "xsm.lock"
LOCK_POLLS = "xsm.lock.polls"
COMMIT_OUTCOME = "xsm.commit.outcome"
EXPECTED_VERSION = "xsm.expected_version"
ERROR_TYPE = "error.type"

# metric attributes (besides xsm.machine)
OPERATION = "xsm.operation"
OUTCOME = "xsm.outcome"
REASON = "xsm.reason"
SCOPE = "xsm.scope"
SOURCE = "xsm.source"


def compact_json(value: Any) -> str:
    """A state value (``"paid"``, ``{"shipping": "packed"}``) as compact,
    key-sorted JSON: one attribute string that compares across spans."""
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(str(value), ensure_ascii=False)


def fail_span(span: Span, exc: BaseException) -> None:
    """Record ``exc`` on ``span`` and set its status to ERROR."""
    span.record_exception(exc)
    span.set_attribute(ERROR_TYPE, type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


class Instruments:
    """The counters and histograms of the ``django_xsm`` meter."""

    def __init__(self, meter: metrics.Meter) -> None:
        self.commits = meter.create_counter(
            "xsm.commits", unit="{commit}", description="Blocks whose changes were committed"
        )
        self.conflicts = meter.create_counter(
            "xsm.conflicts",
            unit="{conflict}",
            description="Commits refused by a fence (version, lock or claim); nothing written",
        )
        self.lock_waits = meter.create_counter(
            "xsm.lock.waits",
            unit="{wait}",
            description="Pessimistic opens that found the lock held (outcome: acquired, timeout)",
        )
        self.replays = meter.create_counter(
            "xsm.idempotency.replays",
            unit="{replay}",
            description="Idempotency keys answered from the inbox instead of running again",
        )
        self.dead_letters = meter.create_counter(
            "xsm.dead_letters",
            unit="{entry}",
            description="Timers and outbox entries that ran out of attempts (source)",
        )
        self.timer_fires = meter.create_counter(
            "xsm.timer.fires",
            unit="{fire}",
            description="Timer fires by outcome: fired, stale, locked, error",
        )
        self.timer_lag = meter.create_histogram(
            "xsm.timer.lag", unit="ms", description="How late a timer fired after its due time"
        )
        self.outbox_deliveries = meter.create_counter(
            "xsm.outbox.deliveries",
            unit="{delivery}",
            description="Outbox deliveries by outcome: delivered, retry, dead, lost",
        )
        self.outbox_lag = meter.create_histogram(
            "xsm.outbox.lag",
            unit="ms",
            description="Age of an outbox entry (since its commit) when a worker took it",
        )
        self.duration = meter.create_histogram(
            "xsm.operation.duration",
            unit="s",
            description="Duration of block opens, sends and commits (operation, outcome)",
        )


class Telemetry:
    """A tracer and the instruments, from the given providers or the
    global ones; ``machine_name`` turns a machine id into the name to
    report (default: the id)."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        machine_name: Callable[[str], str | None] | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(TRACER_NAME, __version__, tracer_provider=tracer_provider)
        self.meter = metrics.get_meter(METER_NAME, __version__, meter_provider=meter_provider)
        self.instruments = Instruments(self.meter)
        self._machine_name = machine_name

    def machine(self, machine_id: str) -> str:
        """The name reported for ``machine_id``."""
        if self._machine_name is not None and machine_id:
            try:
                return self._machine_name(machine_id) or machine_id
            except Exception:
                return machine_id
        return machine_id


def labels(machine: str, extra: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    """Metric attributes: ``xsm.machine`` (when known) and ``extra``."""
    out: dict[str, AttributeValue] = {MACHINE: machine} if machine else {}
    out.update(extra)
    return out
