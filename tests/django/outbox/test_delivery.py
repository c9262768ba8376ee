"""What a committed transition emits reaches its handler: ``xsm_run_outbox
--once`` calls the handler once with the event and its Delivery, acks it,
and a second run finds nothing. Events of blocks that did not commit are
never delivered."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.backend.build import get_outbox
from django_xsm.outbox import Delivery, OutboxWorker, drain, outbox_health
from django_xsm.registry import machines
from tests.django.conftest import key_header
from tests.django.outbox import handlers
from tests.django.outbox.conftest import outcomes, run

SUMMARY_KEYS = (
    "taken delivered retried dead_lettered lost skipped compensated refused deferred unavailable"
)


def test_send_then_once_calls_the_handler_once_and_acks(backend: Any, outbox_log: Any) -> None:
    machines["shipment"].objects.send("shipment:1", "PAY", create=True)
    (pending,) = get_outbox().pending()
    entry, holder, _idle = pending
    assert holder == "" and entry.event_type == "order.paid"
    result = run("xsm_run_outbox", "--once", "--consumer", "test-worker")
    assert result.out.strip() == (
        "taken=1 delivered=1 retried=0 dead_lettered=0 lost=0 skipped=0 compensated=0 "
        "refused=0 deferred=0 unavailable=0"
    )
    assert " ".join(k.split("=")[0] for k in result.out.split()) == SUMMARY_KEYS
    ((name, event, delivery),) = handlers.CALLS
    assert name == "record"
    assert event == {"type": "order.paid", "amount": 7, "card_number": "4111"}
    assert delivery == Delivery(entry.delivery_id, "shipment:1", "shipment", 1, 1)
    assert get_outbox().stats() == {"pending": 0, "retrying": 0, "dead": 0, "lag_ms": 0}
    (line,) = outcomes(outbox_log)
    assert line["outcome"] == "delivered" and line["delivery_id"] == entry.delivery_id
    assert (line["key"], line["event"], line["attempt"]) == ("shipment:1", "order.paid", 1)
    assert line["consumer"] == "test-worker"
    # nothing is delivered twice
    assert run("xsm_run_outbox", "--once").out.startswith("taken=0 delivered=0 ")
    assert len(handlers.CALLS) == 1


def test_a_decorated_view_that_emits_is_delivered(backend: Any, client: Any, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.django.outbox.views"
    response = client.post("/shipments/7/pay", **key_header("pay-7"))
    assert response.status_code == 201, response.content
    replay = client.post("/shipments/7/pay", **key_header("pay-7"))
    assert replay.status_code == 201  # a replayed request emits nothing again
    run("xsm_run_outbox", "--once")
    ((name, event, delivery),) = handlers.CALLS
    assert (name, event["type"], delivery.key, delivery.attempt) == (
        "record",
        "order.paid",
        "shipment:7",
        1,
    )


def test_the_most_specific_handler_takes_each_event_in_commit_order(backend: Any) -> None:
    objects = machines["shipment"].objects
    objects.send("shipment:1", "PAY", create=True)
    objects.send("shipment:1", "SHIP")
    objects.send("shipment:2", "PAY", create=True)
    drain(OutboxWorker.from_settings(consumer="w"))
    got = [(name, event["type"], d.key, d.version) for name, event, d in handlers.CALLS]
    mine = [g for g in got if g[2] == "shipment:1"]
    assert mine == [
        ("record", "order.paid", "shipment:1", 1),
        ("catch_all", "order.shipped", "shipment:1", 2),
    ]
    assert ("record", "order.paid", "shipment:2", 1) in got and len(got) == 3


def test_a_block_that_raised_emits_nothing(backend: Any) -> None:
    with pytest.raises(RuntimeError):
        with machines["shipment"].objects.open("shipment:1") as block:
            block.send("PAY")
            raise RuntimeError("rolled back")
    assert run("xsm_run_outbox", "--once").out.startswith("taken=0 ")
    assert handlers.CALLS == []


def test_the_request_id_an_event_carries_is_logged(
    backend: Any, outbox_log: Any, outbox_settings: Any
) -> None:
    outbox_settings(HANDLERS={"*": "tests.django.outbox.handlers.record"})
    objects = machines["shipment"].objects
    objects.send("shipment:1", "NOTE", kind="order", request_id="req-42", create=True)
    run("xsm_run_outbox", "--once")
    (line,) = outcomes(outbox_log)
    assert (line["outcome"], line["event"], line["correlation_id"]) == (
        "delivered",
        "note.order",
        "req-42",
    )
    assert "[req-42]" in outbox_log.records[-1].getMessage()


def test_health_numbers(backend: Any) -> None:
    machines["shipment"].objects.send("shipment:1", "PAY", create=True)
    found = outbox_health()
    assert found["ok"] is True and found["error"] is None
    assert (found["pending"], found["retrying"], found["dead"]) == (1, 0, 0)
    assert found["lag_ms"] >= 0
