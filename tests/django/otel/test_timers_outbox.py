"""The timer scanner's spans, fires, lag and dead letters; the outbox's
deliveries, lag and dead letters (instrument_scanner, instrument_outbox)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from django_xsm.contrib.otel import OtelPlugin, instrument_outbox, instrument_scanner
from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import StoreUnavailableError
from django_xsm.persistence import DueTimerScanner, MemoryStore, persisted
from django_xsm.redis import RedisOutbox, RedisStore
from tests.django.otel.support import Telemetry, children_of
from tests.support import FakeClock, fakeredis_client, timer_machine


def _count(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    if ctx.get("poison"):
        raise RuntimeError("downstream refused the expiry")
    ctx["fired"] += 1


TIMER = timer_machine(_count)


def _waiting(store: Any, clock: FakeClock, key: str, **context: Any) -> int:
    with persisted(store, key, TIMER, context={"fired": 0, **context}, clock=clock) as t:
        t.send("POKE")
        return int(t.deadlines[0].due_ms)


def test_a_scan_traces_each_fire_and_its_block(telemetry: Telemetry) -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    due = _waiting(store, clock, "t:1")
    _waiting(store, clock, "t:2")
    plugin = telemetry.plugin()
    scanner = instrument_scanner(DueTimerScanner(store, {"timer": TIMER}, now=clock), plugin)
    assert instrument_scanner(scanner, plugin) is scanner  # idempotent
    assert [p for p in scanner.plugins if isinstance(p, OtelPlugin)] == [plugin]
    result = scanner.scan(now=due + 250)
    assert (result.scanned, result.fired, result.max_lag_ms) == (2, 2, 250)

    scan = telemetry.span("xsm.timer.scan")
    assert scan.attributes is not None
    assert (scan.attributes["xsm.timer.scanned"], scan.attributes["xsm.timer.fired"]) == (2, 2)
    spans = telemetry.spans()
    assert children_of(scan, spans) == ["xsm.timer.fire", "xsm.timer.fire"]
    first = telemetry.spans("xsm.timer.fire")[0]
    assert first.attributes is not None and first.attributes["xsm.key"] == "t:1"
    assert children_of(first, spans) == ["xsm.open", "xsm.send", "xsm.commit"]
    send = next(s for s in spans if s.name == "xsm.send")
    assert send.attributes is not None
    assert str(send.attributes["xsm.event"]).startswith("xstate.after.")
    assert send.attributes["xsm.to"] == '"expired"'

    assert telemetry.count("xsm.timer.fires", xsm_outcome="fired") == 2
    assert telemetry.histogram("xsm.timer.lag") == (2, 500)
    assert telemetry.count("xsm.commits", xsm_machine="timer") == 2


def test_stale_fires_and_dead_letters_are_counted(telemetry: Telemetry) -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    due = _waiting(store, clock, "t:bad", poison=True)
    scanner = DueTimerScanner(store, {"timer": TIMER}, now=clock, max_attempts=1)
    instrument_scanner(scanner, telemetry.plugin())
    result = scanner.scan(now=due)
    assert (result.errors, result.dead_lettered) == (1, 1)
    assert telemetry.count("xsm.timer.fires", xsm_outcome="error") == 1
    assert telemetry.count("xsm.dead_letters", xsm_source="timer") == 1
    send = telemetry.span("xsm.send")
    assert send.status.status_code is StatusCode.ERROR
    assert scanner.fire("t:bad", now=due + 10).stale == 1  # dead: skipped
    assert telemetry.count("xsm.timer.fires", xsm_outcome="stale") == 1
    assert telemetry.histogram("xsm.timer.lag") == (0, 0)


def test_a_store_outage_fails_the_scan_span(telemetry: Telemetry) -> None:
    class Down(MemoryStore):
        def due_keys(self, *args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailableError("Redis did not answer (ConnectionError)")

    scanner = instrument_scanner(DueTimerScanner(Down(), {}), telemetry.plugin())
    with pytest.raises(StoreUnavailableError):
        scanner.scan()
    scan = telemetry.span("xsm.timer.scan")
    assert scan.status.status_code is StatusCode.ERROR


CHART: dict[str, Any] = {
    "id": "order",
    "initial": "new",
    "states": {
        "new": {
            "on": {
                "PAY": {
                    "target": "paid",
                    "actions": {"type": "xstate.emit", "event": {"type": "order.paid"}},
                }
            }
        },
        "paid": {},
    },
}
ORDER = create_machine(CHART, logic=MachineLogic())


def test_outbox_deliveries_lag_and_dead_letters(telemetry: Telemetry) -> None:
    client = fakeredis_client()
    store = RedisStore(client, prefix="otel-ob", buckets=2)
    for n in range(3):
        with persisted(store, f"order:{n}", ORDER) as order:
            order.send("PAY")
    outbox = RedisOutbox(client, prefix="otel-ob", buckets=2)
    assert instrument_outbox(outbox, telemetry.plugin()) is outbox
    time.sleep(0.02)
    leases = outbox.take("w1", count=3)
    assert len(leases) == 3
    count, total = telemetry.histogram("xsm.outbox.lag")
    assert count == 3 and total >= 3 * 10
    assert outbox.ack(leases[0]) is True
    assert outbox.fail(leases[1], "timeout", retry_at_ms=int(time.time() * 1000) + 60_000) == (
        "retry"
    )
    assert outbox.fail(leases[2], "gave up", retry_at_ms=None) == "dead"
    assert outbox.ack(leases[0]) is False  # already acknowledged: lost
    assert telemetry.count("xsm.outbox.deliveries", xsm_outcome="delivered") == 1
    assert telemetry.count("xsm.outbox.deliveries", xsm_outcome="retry") == 1
    assert telemetry.count("xsm.outbox.deliveries", xsm_outcome="dead") == 1
    assert telemetry.count("xsm.outbox.deliveries", xsm_outcome="lost") == 1
    assert telemetry.count("xsm.outbox.deliveries", xsm_event="order.paid") == 4
    assert telemetry.count("xsm.dead_letters", xsm_source="outbox") == 1


def test_a_workers_batch_ack_counts_each_delivery(telemetry: Telemetry) -> None:
    client = fakeredis_client()
    store = RedisStore(client, prefix="otel-am", buckets=1)
    for n in range(2):
        with persisted(store, f"order:{n}", ORDER) as order:
            order.send("PAY")
    outbox = instrument_outbox(RedisOutbox(client, prefix="otel-am", buckets=1), telemetry.plugin())
    leases = outbox.take("w1", count=2)
    assert outbox.ack_many(leases) == [True, True]  # how OutboxWorker acknowledges
    assert outbox.ack_many(leases[:1]) == [False]
    assert telemetry.count("xsm.outbox.deliveries", xsm_outcome="delivered") == 2
    assert telemetry.count("xsm.outbox.deliveries", xsm_outcome="lost") == 1


def test_instrument_outbox_wants_an_outbox_reader() -> None:
    with pytest.raises(TypeError, match="needs an OutboxReader"):
        instrument_outbox(object(), OtelPlugin())  # type: ignore[arg-type]
