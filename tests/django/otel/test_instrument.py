"""instrument(): every block of the process is traced (views, managers, the
timer scanner, the outbox), under the request's span, with the registry's
machine names; uninstrument() stops it. Runs on fakeredis and, with
XSM_REDIS_URL, on the live server."""

from __future__ import annotations

from typing import Any

from bench.request_path import probe
from django_xsm import backend as stores
from django_xsm.contrib import otel
from django_xsm.persistence import DueTimerScanner, persisted
from django_xsm.persistence.block import process_plugins
from django_xsm.redis import RedisOutbox
from django_xsm.registry import machines
from tests.django.otel.support import Telemetry, children_of
from tests.django.otel.test_timers_outbox import ORDER
from tests.django.test_request_path import MAX_FRAMES


def _instrument(telemetry: Telemetry) -> otel.OtelPlugin:
    return otel.instrument(
        tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider
    )


def test_a_request_traces_its_block_under_the_request_span(
    client: Any, backend: stores.Backend, telemetry: Telemetry
) -> None:
    plugin = _instrument(telemetry)
    assert otel.instrument() is plugin and otel.instrumented() is plugin
    with telemetry.parent():
        response = client.post("/t/x1/bump", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 201
    spans = telemetry.spans("")
    request = next(s for s in spans if s.name == "request")
    assert children_of(request, spans) == ["xsm.open", "xsm.send", "xsm.commit"]
    send = telemetry.span("xsm.send")
    assert send.attributes is not None
    assert send.attributes["xsm.machine"] == "ticket"  # the registry's name
    assert send.attributes["xsm.key"] == "ticket:x1"
    assert send.attributes["xsm.event"] == "BUMP"
    assert send.attributes["xsm.guard_result"] == "accepted"
    assert telemetry.count("xsm.commits", xsm_machine="ticket") == 1

    replayed = client.post("/t/x1/bump", HTTP_IDEMPOTENCY_KEY="k1")
    assert replayed["Idempotent-Replayed"] == "true"
    assert telemetry.count("xsm.idempotency.replays", xsm_scope="block") == 1
    assert telemetry.count("xsm.commits") == 1


def test_an_async_view_is_traced_too(
    client: Any, backend: stores.Backend, telemetry: Telemetry
) -> None:
    _instrument(telemetry)
    with telemetry.parent():
        assert client.post("/t/x2/abump", HTTP_IDEMPOTENCY_KEY="k2").status_code == 201
    spans = telemetry.spans("")
    request = next(s for s in spans if s.name == "request")
    assert children_of(request, spans) == ["xsm.open", "xsm.send", "xsm.commit"]


def test_managers_and_raw_blocks_get_the_plugin_once(
    backend: stores.Backend, telemetry: Telemetry
) -> None:
    plugin = _instrument(telemetry)
    with machines["ticket"].objects.open("ticket:m1") as block:
        block.send("BUMP")
        assert [h for h in block.hooks if isinstance(h, otel.OtelPlugin)] == [plugin]
    own = telemetry.plugin()
    entry = machines["ticket"].machine
    with persisted(backend.store, "ticket:m1", entry, plugins=[own]) as block:
        block.send("BUMP")
        assert [h for h in block.hooks if isinstance(h, otel.OtelPlugin)] == [own]
    assert len(telemetry.spans("xsm.send")) == 2


def test_the_backends_scanner_and_outbox_are_measured(
    backend: stores.Backend, telemetry: Telemetry
) -> None:
    _instrument(telemetry)
    with machines["ticket"].objects.open("ticket:t1") as block:
        block.send("BUMP")
        due = block.deadlines[0].due_ms
    scanner = stores.get_scanner()
    assert isinstance(scanner, DueTimerScanner)
    assert scanner.scan(now=due + 5).fired == 1
    fire = telemetry.span("xsm.timer.fire")
    assert children_of(fire, telemetry.spans()) == ["xsm.open", "xsm.send", "xsm.commit"]
    assert telemetry.count("xsm.timer.fires", xsm_outcome="fired") == 1
    assert telemetry.histogram("xsm.timer.lag")[0] == 1
    with persisted(backend.store, "order:o1", ORDER) as order:
        order.send("PAY")  # emits order.paid into the outbox
    outbox = RedisOutbox(backend.client, prefix=backend.store.prefix)  # as a worker builds it
    (lease,) = outbox.take("w1")
    assert outbox.ack(lease) is True
    assert telemetry.histogram("xsm.outbox.lag")[0] == 1
    assert telemetry.count("xsm.outbox.deliveries", xsm_outcome="delivered") == 1


def test_uninstrument_stops_tracing_new_blocks(
    backend: stores.Backend, telemetry: Telemetry
) -> None:
    _instrument(telemetry)
    otel.uninstrument()
    assert otel.instrumented() is None and process_plugins() == ()
    with machines["ticket"].objects.open("ticket:u1") as block:
        block.send("BUMP")
        assert not any(isinstance(h, otel.OtelPlugin) for h in block.hooks)
    stores.get_scanner().scan()
    outbox = RedisOutbox(backend.client, prefix=backend.store.prefix)
    assert outbox.take("w1") == []
    assert telemetry.spans() == []
    assert telemetry.points("xsm.outbox.lag") == telemetry.points("xsm.commits") == []


def test_tracing_adds_no_frame_at_commit(
    client: Any, backend: stores.Backend, telemetry: Telemetry
) -> None:
    """The block enters the phases with plain context managers: a traced
    request is as deep at ``COMMIT`` as an untraced one
    (tests/django/test_request_path.py)."""
    _instrument(telemetry)
    path = probe("key", lambda: client.post("/t/f1/bump", HTTP_IDEMPOTENCY_KEY="f1"))
    assert path.loops == 1 and path.count <= MAX_FRAMES["key"], path.frames
    commit = telemetry.span("xsm.commit").attributes or {}
    assert commit["xsm.commit.outcome"] == "committed"
