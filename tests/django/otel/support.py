"""What the OpenTelemetry tests read back: spans and metric points."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from django_xsm.contrib import otel


@dataclass
class Telemetry:
    """What the code under test reported."""

    tracer_provider: TracerProvider
    exporter: InMemorySpanExporter
    meter_provider: MeterProvider
    reader: InMemoryMetricReader

    def plugin(self, **kwargs: Any) -> otel.OtelPlugin:
        return otel.OtelPlugin(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kwargs
        )

    def spans(self, prefix: str = "xsm.") -> list[ReadableSpan]:
        """Finished spans whose name starts with ``prefix``, in end order."""
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def span(self, name: str) -> ReadableSpan:
        (found,) = [s for s in self.spans() if s.name == name]
        return found

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, point)`` of every data point of ``metric``."""
        data = self.reader.get_metrics_data()
        out: list[tuple[dict[str, Any], Any]] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for found in scope.metrics:
                    if found.name == metric:
                        out.extend((dict(p.attributes or {}), p) for p in found.data.data_points)
        return out

    def count(self, metric: str, **attributes: Any) -> int:
        """The sum of ``metric``'s points whose attributes include
        ``attributes`` (dots spelled as underscores: xsm_outcome)."""
        wanted = {k.replace("_", "."): v for k, v in attributes.items()}
        return sum(
            int(p.value)
            for attrs, p in self.points(metric)
            if all(attrs.get(k) == v for k, v in wanted.items())
        )

    def count_points(self, metric: str, **attributes: Any) -> int:
        """How many values histogram ``metric`` recorded with ``attributes``."""
        wanted = {k.replace("_", "."): v for k, v in attributes.items()}
        return sum(
            int(p.count)
            for attrs, p in self.points(metric)
            if all(attrs.get(k) == v for k, v in wanted.items())
        )

    def histogram(self, metric: str) -> tuple[int, float]:
        """``(count, sum)`` over every point of histogram ``metric``."""
        points = [p for _, p in self.points(metric)]
        return sum(p.count for p in points), sum(p.sum for p in points)

    def parent(self) -> Any:
        """A span to run the code under, as the request span would be."""
        return self.tracer_provider.get_tracer("tests").start_as_current_span("request")


def children_of(parent: ReadableSpan, spans: list[ReadableSpan]) -> list[str]:
    """Names of the spans whose parent is ``parent``, in end order."""
    ctx = parent.get_span_context()
    assert ctx is not None
    return [s.name for s in spans if s.parent is not None and s.parent.span_id == ctx.span_id]


def same_trace(spans: list[ReadableSpan]) -> bool:
    ids = {s.get_span_context().trace_id for s in spans if s.get_span_context() is not None}
    return len(ids) == 1 and trace.INVALID_TRACE_ID not in ids
