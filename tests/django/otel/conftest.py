"""Fixtures of the OpenTelemetry tests: an SDK tracer provider exporting to
memory, an SDK meter provider read in memory (``telemetry``).

The providers are passed to the plugins (never set globally), so every test
sees only its own spans and points. Every test ends with ``instrument()``
undone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from django_xsm.contrib import otel
from tests.django.otel.support import Telemetry


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    try:
        yield Telemetry(tracer_provider, exporter, meter_provider, reader)
    finally:
        otel.uninstrument()
        meter_provider.shutdown()
        tracer_provider.shutdown()
