"""OtelPlugin: one span per block open, per event sent and per commit.

::

    from django_xsm.contrib.otel import OtelPlugin
    with persisted(store, "order:42", machine, plugins=[OtelPlugin()]) as order:
        order.send("PAY")

Spans ``xsm.open``, ``xsm.send`` and ``xsm.commit`` (tracer ``django_xsm``)
are children of the context current when the phase starts and are current
while it runs; their attributes, and how errors are recorded:
docs/observability.md (Spans). They come from the block's ``phase`` and
``on_replay`` hooks (see :class:`~django_xsm.persistence.block.Plugin`).
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context, metrics, trace
from opentelemetry.trace import Span, SpanKind

from django_xsm.exceptions import ConflictError, EventNotAcceptedError, LockTimeoutError
from django_xsm.persistence.block import PersistedInstance, Plugin, process_plugins
from django_xsm.persistence.records import CommitResult, StoredRecord

from . import telemetry as t

__all__ = ["OtelPlugin", "default_plugin"]


@dataclass(slots=True)
class _Live:
    """The spans of one block's phases that are still open."""

    spans: dict[str, Span] = field(default_factory=dict)
    lock_polls: int = 0


class OtelPlugin(Plugin):
    """Spans and metrics of every block it is a plugin of.

    ``tracer_provider`` / ``meter_provider``: default OpenTelemetry's
    global providers. ``machine_name``: machine id -> reported name
    (``django_xsm.contrib.otel.instrument()`` passes the registry's).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        machine_name: Callable[[str], str | None] | None = None,
    ) -> None:
        self.telemetry = t.Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            machine_name=machine_name,
        )
        self._live: weakref.WeakKeyDictionary[PersistedInstance, _Live] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    # --- per-block state -----------------------------------------------------------

    def _state(self, block: PersistedInstance) -> _Live:
        with self._lock:
            found = self._live.get(block)
            if found is None:
                found = self._live[block] = _Live()
            return found

    def _span(self, block: PersistedInstance, phase: str) -> Span | None:
        with self._lock:
            found = self._live.get(block)
        return found.spans.get(phase) if found is not None else None

    def machine(self, block: PersistedInstance) -> str:
        """The reported name of the block's machine ('' before it is known)."""
        machine = block.machine
        return self.telemetry.machine(str(machine.id)) if machine is not None else ""

    # --- the phases ---------------------------------------------------------------

    @contextlib.contextmanager
    def phase(self, block: PersistedInstance, name: str, event_type: str = "") -> Iterator[None]:
        """Span ``xsm.<name>`` around the phase, current while it runs."""
        attributes = self._start_attributes(block, name, event_type)
        span = self.telemetry.tracer.start_span(
            f"xsm.{name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        live = self._state(block)
        live.spans[name] = span
        token = context.attach(trace.set_span_in_context(span))
        started = time.perf_counter()
        outcome = "ok"
        try:
            yield
        except GeneratorExit:
            outcome = "abandoned"  # the block's generator was closed, never finished
            raise
        except BaseException as exc:
            outcome = "error"
            self._failed(block, name, span, exc)
            raise
        finally:
            live.spans.pop(name, None)
            context.detach(token)
            self._ended(block, name, span, live, outcome)
            span.end()
            self.telemetry.instruments.duration.record(
                time.perf_counter() - started,
                t.labels(self.machine(block), {t.OPERATION: name, t.OUTCOME: outcome}),
            )

    def _start_attributes(
        self, block: PersistedInstance, name: str, event_type: str
    ) -> dict[str, Any]:
        attributes: dict[str, Any] = {t.KEY: block.key}
        machine = self.machine(block)
        if machine:
            attributes[t.MACHINE] = machine
        if name == "open":
            attributes[t.LOCK] = "pessimistic" if block.options.lock.pessimistic else "optimistic"
        elif name == "send":
            attributes[t.EVENT] = event_type
            attributes[t.VERSION] = block.version
            if block.instance is not None:
                attributes[t.FROM] = t.compact_json(block.instance.value)
        else:
            attributes[t.EXPECTED_VERSION] = block.version
        return attributes

    def _failed(self, block: PersistedInstance, name: str, span: Span, exc: BaseException) -> None:
        t.fail_span(span, exc)
        machine = self.machine(block)
        found = self.telemetry.instruments
        if isinstance(exc, ConflictError):
            span.set_attribute(t.REASON, exc.reason)
            found.conflicts.add(1, t.labels(machine, {t.REASON: exc.reason}))
        elif isinstance(exc, LockTimeoutError):
            found.lock_waits.add(1, t.labels(machine, {t.OUTCOME: "timeout"}))
        elif isinstance(exc, EventNotAcceptedError):
            span.set_attribute(t.GUARD_RESULT, "refused")
            span.set_attribute(t.REFUSAL_REASON, exc.reason)
            span.set_attribute(t.REFUSAL_GUARDS, list(exc.guards))

    def _ended(
        self, block: PersistedInstance, name: str, span: Span, live: _Live, outcome: str
    ) -> None:
        if name == "open" and live.lock_polls:
            span.set_attribute(t.LOCK_POLLS, live.lock_polls)
            if outcome == "ok":
                waits = self.telemetry.instruments.lock_waits
                waits.add(1, t.labels(self.machine(block), {t.OUTCOME: "acquired"}))
        elif name == "commit" and outcome == "ok" and block.committed is None:
            span.set_attribute(t.COMMIT_OUTCOME, "nothing")

    def on_lock_busy(self, block: PersistedInstance, busy_ms: int) -> None:
        self._state(block).lock_polls += 1

    def on_replay(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        span = self._span(block, "send")
        if span is not None:
            span.set_attribute(t.DUPLICATE, True)
            span.set_attribute(t.GUARD_RESULT, "accepted" if receipt.accepted else "refused")
            span.set_attribute(t.TO, t.compact_json(receipt.value))
        if not block.duplicate:  # a replayed block was counted once, at open
            replays = self.telemetry.instruments.replays
            replays.add(1, t.labels(self.machine(block), {t.SCOPE: "send"}))

    # --- the Plugin hooks ----------------------------------------------------------

    def on_load(self, block: PersistedInstance, record: StoredRecord | None) -> None:
        machine = self.machine(block)
        span = self._span(block, "open")
        if span is not None:
            attributes: Mapping[str, Any] = {
                t.MACHINE: machine,
                t.VERSION: block.version,
                t.FROM: t.compact_json(block.instance.value),
                t.CREATED: record is None,
                t.DUPLICATE: block.duplicate,
            }
            span.set_attributes(attributes)
        if block.duplicate:
            replays = self.telemetry.instruments.replays
            replays.add(1, t.labels(machine, {t.SCOPE: "block"}))

    def after_send(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        span = self._span(block, "send")
        if span is None:
            return
        span.set_attribute(t.TO, t.compact_json(receipt.value))
        span.set_attribute(t.CHANGED, bool(receipt.changed))
        if receipt.accepted:
            span.set_attribute(t.GUARD_RESULT, "accepted")
            return
        span.set_attribute(t.GUARD_RESULT, "refused")
        reason, guards = block.instance.refusal(event_type)
        span.set_attribute(t.REFUSAL_REASON, reason)
        span.set_attribute(t.REFUSAL_GUARDS, list(guards))

    def after_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        span = self._span(block, "commit")
        if span is not None:
            span.set_attribute(t.VERSION, result.version)
            span.set_attribute(t.COMMIT_OUTCOME, "committed")
        self.telemetry.instruments.commits.add(1, t.labels(self.machine(block), {}))

    def __repr__(self) -> str:
        return "OtelPlugin()"


def default_plugin() -> OtelPlugin:
    """The plugin every block was given (``instrument()``), else a new one
    on the global providers."""
    for plugin in process_plugins():
        if isinstance(plugin, OtelPlugin):
            return plugin
    return OtelPlugin()
