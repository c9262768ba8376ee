"""OtelPlugin's spans: one per open, per send and per commit, children of
the current span, with the xsm.* attributes; errors recorded with status
ERROR (docs/observability.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import ConflictError, EventNotAcceptedError
from django_xsm.persistence import (
    IdempotencyPlugin,
    MemoryInbox,
    MemoryStore,
    apersisted,
    persisted,
)
from django_xsm.redis import AsyncRedisStore
from tests.django.otel.support import Telemetry, children_of, same_trace

CHART: dict[str, Any] = {
    "id": "order",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {
            "on": {
                "ADD": {"actions": "add"},
                "PAY": {"target": "paid", "guard": "hasItems"},
                "BOOM": {"actions": "boom"},
            }
        },
        "paid": {
            "initial": "packing",
            "states": {"packing": {"on": {"PACKED": "sent"}}, "sent": {}},
        },
    },
}


def _add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["items"] += 1


def _boom(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    raise RuntimeError("boom")


MACHINE = create_machine(
    CHART,
    logic=MachineLogic(
        actions={"add": _add, "boom": _boom},
        guards={"hasItems": lambda ctx, event: ctx["items"] > 0},
    ),
)


def test_open_send_and_commit_are_children_of_the_current_span(telemetry: Telemetry) -> None:
    store = MemoryStore()
    plugin = telemetry.plugin()
    with telemetry.parent():
        with persisted(store, "order:1", MACHINE, plugins=[plugin]) as order:
            order.send("ADD")
            order.send("PAY")
    spans = telemetry.spans("")
    request = next(s for s in spans if s.name == "request")
    names = children_of(request, spans)
    assert names == ["xsm.open", "xsm.send", "xsm.send", "xsm.commit"]
    assert same_trace(spans)

    opened = telemetry.span("xsm.open")
    assert dict(opened.attributes or {}) == {
        "xsm.key": "order:1",
        "xsm.lock": "optimistic",
        "xsm.machine": "order",
        "xsm.version": 0,
        "xsm.from": '"cart"',
        "xsm.created": True,
        "xsm.duplicate": False,
    }
    add, pay = telemetry.spans("xsm.send")
    assert dict(pay.attributes or {}) == {
        "xsm.key": "order:1",
        "xsm.machine": "order",
        "xsm.event": "PAY",
        "xsm.version": 0,
        "xsm.from": '"cart"',
        "xsm.to": '{"paid":"packing"}',
        "xsm.changed": True,
        "xsm.guard_result": "accepted",
    }
    assert add.attributes is not None and add.attributes["xsm.to"] == '"cart"'
    committed = telemetry.span("xsm.commit")
    assert dict(committed.attributes or {}) == {
        "xsm.key": "order:1",
        "xsm.machine": "order",
        "xsm.expected_version": 0,
        "xsm.version": 1,
        "xsm.commit.outcome": "committed",
    }
    assert all(s.status.status_code is StatusCode.UNSET for s in telemetry.spans())


def test_a_refused_event_says_why_and_commits_nothing(telemetry: Telemetry) -> None:
    store = MemoryStore()
    with persisted(store, "order:1", MACHINE, plugins=[telemetry.plugin()]) as order:
        order.send("PAY")  # no items: the guard says no
    send = telemetry.span("xsm.send")
    assert send.attributes is not None
    assert send.attributes["xsm.guard_result"] == "refused"
    assert send.attributes["xsm.refusal.reason"] == "guard-refused"
    assert tuple(send.attributes["xsm.refusal.guards"]) == ("hasItems",)
    assert send.attributes["xsm.to"] == send.attributes["xsm.from"] == '"cart"'
    commit = telemetry.span("xsm.commit")
    assert commit.attributes is not None
    assert commit.attributes["xsm.commit.outcome"] == "nothing"
    assert "xsm.version" not in commit.attributes


def test_a_strict_refusal_is_an_error_on_its_send_span(telemetry: Telemetry) -> None:
    store = MemoryStore()
    with pytest.raises(EventNotAcceptedError):
        with persisted(store, "order:1", MACHINE, plugins=[telemetry.plugin()]) as order:
            order.send("PACKED", strict=True)  # the chart's, not the cart's
    send = telemetry.span("xsm.send")
    assert send.status.status_code is StatusCode.ERROR
    assert send.attributes is not None
    assert send.attributes["xsm.guard_result"] == "refused"
    assert send.attributes["xsm.refusal.reason"] == "no-transition"
    assert send.attributes["error.type"] == "EventNotAcceptedError"
    assert [e.name for e in send.events] == ["exception"]
    # the body raised: the block wrote nothing and has no commit span
    assert [s.name for s in telemetry.spans()] == ["xsm.open", "xsm.send"]


def test_an_action_that_raises_is_recorded_on_its_send(telemetry: Telemetry) -> None:
    store = MemoryStore()
    with telemetry.parent():
        with pytest.raises(RuntimeError, match="boom"):
            with persisted(store, "order:1", MACHINE, plugins=[telemetry.plugin()]) as order:
                order.send("BOOM")
    send = telemetry.span("xsm.send")
    assert send.status.status_code is StatusCode.ERROR
    assert send.status.description == "RuntimeError"
    (event,) = send.events
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "RuntimeError"
    assert event.attributes["exception.message"] == "boom"


def test_a_conflict_fails_the_commit_span(telemetry: Telemetry) -> None:
    store = MemoryStore()
    plugin = telemetry.plugin()
    with persisted(store, "order:1", MACHINE, plugins=[plugin]) as order:
        order.send("ADD")
    telemetry.exporter.clear()
    with pytest.raises(ConflictError):
        with persisted(store, "order:1", MACHINE, plugins=[plugin]) as late:
            with persisted(store, "order:1", MACHINE) as first:
                first.send("ADD")
            late.send("ADD")
    commit = telemetry.span("xsm.commit")
    assert commit.status.status_code is StatusCode.ERROR
    assert commit.attributes is not None
    assert commit.attributes["error.type"] == "ConflictError"
    assert commit.attributes["xsm.reason"] == "version"
    assert commit.attributes["xsm.expected_version"] == 1


def test_idempotent_replays_are_marked_duplicate(telemetry: Telemetry) -> None:
    store = MemoryStore()
    inbox = MemoryInbox(store)
    plugins = [IdempotencyPlugin(inbox), telemetry.plugin()]
    for _ in range(2):
        with persisted(store, "order:1", MACHINE, plugins=plugins) as order:
            order.send("ADD", idempotency_key="evt-1")
    first, second = telemetry.spans("xsm.send")
    assert first.attributes is not None and "xsm.duplicate" not in first.attributes
    assert second.attributes is not None
    assert second.attributes["xsm.duplicate"] is True
    assert second.attributes["xsm.guard_result"] == "accepted"
    for _ in range(2):
        with persisted(store, "order:1", MACHINE, plugins=plugins, idempotency_key="blk") as o:
            o.send("ADD")
    opened = telemetry.spans("xsm.open")[-1]
    assert opened.attributes is not None and opened.attributes["xsm.duplicate"] is True
    assert telemetry.spans("xsm.send")[-1].attributes["xsm.duplicate"] is True  # type: ignore[index]


def test_a_machine_name_replaces_the_id(telemetry: Telemetry) -> None:
    plugin = telemetry.plugin(machine_name={"order": "shop-order"}.get)
    with persisted(MemoryStore(), "order:1", MACHINE, plugins=[plugin]) as order:
        order.send("ADD")
    assert {s.attributes["xsm.machine"] for s in telemetry.spans()} == {"shop-order"}  # type: ignore[index]


def test_apersisted_spans_are_children_of_the_task_context(telemetry: Telemetry) -> None:
    import fakeredis

    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    store = AsyncRedisStore(client, prefix="otel-async", buckets=2)
    plugin = telemetry.plugin()

    async def run() -> None:
        with telemetry.parent():
            async with apersisted(store, "order:1", MACHINE, plugins=[plugin]) as order:
                order.send("ADD")
                await order.asend("PAY")
        await client.aclose()

    asyncio.run(run())
    spans = telemetry.spans("")
    request = next(s for s in spans if s.name == "request")
    assert children_of(request, spans) == ["xsm.open", "xsm.send", "xsm.send", "xsm.commit"]
    assert telemetry.span("xsm.commit").attributes["xsm.version"] == 1  # type: ignore[index]
