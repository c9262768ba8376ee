"""A failing handler is retried with full-jitter backoff (the retry time is
stored in Redis, the worker never sleeps), dead-lettered after MAX_ATTEMPTS
with its redacted error, and the instance that emitted the event receives
``xsm.outbox.failed`` once — also across a redrive and a crashed worker.

The random source and the clock are injected: the clock runs an hour
behind so every retry is due at once and the stored due times are exact;
nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm.backend.build import get_outbox, get_store
from django_xsm.outbox import (
    FAILED_EVENT,
    HandlerTable,
    OutboxWorker,
    RetryPolicy,
    compensate,
    drain,
)
from django_xsm.registry import machines
from tests.django.outbox import handlers
from tests.django.outbox.conftest import Recorder, outcomes, run
from tests.django.outbox.conftest import worker as make_worker


def test_full_jitter_stays_below_the_doubling_cap() -> None:
    policy = RetryPolicy.of(10, 1.0, 300.0, random.Random(7))
    ceilings = [policy.ceiling_ms(n) for n in range(1, 12)]
    assert ceilings == [n * 1000 for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300)]
    for n in range(1, 12):
        delays = [policy.delay_ms(n) for _ in range(200)]
        assert all(0 <= d <= ceilings[n - 1] for d in delays)
        assert max(delays) > ceilings[n - 1] / 2  # spread over the window, not clustered
    recorder = Recorder(1.0)
    assert RetryPolicy.of(5, 0.5, 3.0, recorder).delay_ms(4) == 3000
    assert recorder.asked == [(0, 3000)]
    assert RetryPolicy.of(5, 1.0, 3.0, recorder).ceiling_ms(10_000) == 3000  # no overflow
    assert not RetryPolicy.of(3, 0, 0).exhausted(2) and RetryPolicy.of(3, 0, 0).exhausted(3)


def test_retry_with_jitter_then_dead_letter_then_one_compensation(
    backend: Any, outbox_log: Any
) -> None:
    handlers.FAIL["flaky"] = -1
    objects = machines["shipment"].objects
    objects.send("shipment:1", "PAY", create=True)
    rng = Recorder(0.25)
    w, base = make_worker(rng)
    w.handlers = HandlerTable({"order.paid": handlers.flaky})
    outbox = get_outbox()

    first = w.run_batch()
    assert (first.taken, first.retried, first.dead_lettered) == (1, 1, 0)
    ((entry, due),) = outbox.waiting()
    assert due == base + 500  # a quarter of min(3, 2 * 2**0) seconds
    assert entry.attempts == 1
    assert entry.last_error == (
        "ConnectionError: gateway down (card_number=[redacted], token=[redacted])"
    )
    second = w.run_batch()
    assert second.retried == 1
    ((entry, due),) = outbox.waiting()
    assert due == base + 750 and entry.attempts == 2  # a quarter of min(3, 2 * 2**1)
    assert rng.asked == [(0, 2000), (0, 3000)]
    third = w.run_batch()
    assert (third.dead_lettered, third.compensated, third.refused) == (1, 1, 0)
    assert rng.asked == [(0, 2000), (0, 3000)]  # no wait after the last attempt

    delivery_id = entry.delivery_id
    assert [(c[2].delivery_id, c[2].attempt) for c in handlers.CALLS] == [
        (delivery_id, 1),
        (delivery_id, 2),
        (delivery_id, 3),
    ]
    (dead,) = outbox.dead_letters()
    assert (dead.entry.delivery_id, dead.entry.attempts) == (delivery_id, 3)
    assert dead.entry.last_error == entry.last_error
    view = objects.get("shipment:1")
    assert view.value == "compensating"
    assert view.context["failures"] == 1
    assert view.context["failed"] == {
        "delivery_id": delivery_id,
        "attempts": 3,
        "error": entry.last_error,
        "event_type": "order.paid",
    }
    (record,) = [r for r in objects.history("shipment:1") if r.event_type == FAILED_EVENT]
    assert record.idempotency_key == delivery_id
    assert record.actor == "xsm:outbox"
    said = [(line["outcome"], line["attempt"]) for line in outcomes(outbox_log)]
    assert said == [
        ("retry", 1),
        ("retry", 2),
        ("compensation sent", 3),
        ("dead-lettered", 3),
    ]
    assert outbox.stats()["dead"] == 1

    # a second worker run finds nothing and applies nothing
    assert run("xsm_run_outbox", "--once").out.startswith("taken=0 ")
    assert objects.get("shipment:1").context["failures"] == 1

    # redriven, failing again: its delivery id is the same, so the
    # compensation is replayed, not applied a second time
    run("xsm_outbox", "--redrive", delivery_id)
    ((entry, _who, _idle),) = outbox.pending()
    assert (entry.delivery_id, entry.attempts) == (delivery_id, 0)
    again = drain(w)
    assert (again.retried, again.dead_lettered, again.compensated) == (2, 1, 1)
    assert objects.get("shipment:1").context["failures"] == 1
    logged = [r for r in objects.history("shipment:1") if r.event_type == FAILED_EVENT]
    assert len(logged) == 1
    assert "already applied" in outbox_log.records[-2].getMessage()


def test_a_worker_that_crashed_after_compensating_does_not_compensate_twice(
    backend: Any, outbox_settings: Any
) -> None:
    outbox_settings(MAX_ATTEMPTS=1, VISIBILITY_TIMEOUT_S=0.05)
    objects = machines["shipment"].objects
    objects.send("shipment:1", "PAY", create=True)
    outbox = get_outbox()
    # the crashed worker: it took the entry, its handler failed, it sent the
    # compensation, and it died before dead-lettering the entry
    (lease,) = outbox.take("crashed", visibility_timeout_ms=50)
    assert compensate(lease.entry, "ConnectionError: gateway down", 1).outcome == "sent"
    survivor = OutboxWorker.from_settings(consumer="survivor")
    total = survivor.run_batch()
    while total.taken == 0:  # the lease ends 50 ms after the take (server clock)
        total = survivor.run_batch()
    assert (total.dead_lettered, total.compensated) == (1, 1)
    assert handlers.CALLS == []  # out of attempts: the handler is not called again
    view = objects.get("shipment:1")
    assert (view.value, view.context["failures"]) == ("compensating", 1)
    (dead,) = outbox.dead_letters()
    assert dead.entry.last_error.startswith("gave up after 1 attempt(s): the delivery was")


def test_an_instance_that_refuses_the_compensation_is_logged_not_retried(
    backend: Any, outbox_log: Any
) -> None:
    handlers.FAIL["flaky"] = -1
    machines["mute"].objects.send("mute:1", "PING", create=True)
    with pytest.raises(CommandError, match=r"^1 delivery\(ies\) failed \(.*\); see the"):
        run("xsm_run_outbox", "--once")
    (refused,) = [r for r in outbox_log.records if r.xsm["outcome"] == "compensation refused"]
    assert refused.levelname == "WARNING"
    assert refused.xsm["key"] == "mute:1"
    (dead,) = get_outbox().dead_letters()
    assert refused.xsm["delivery_id"] == dead.entry.delivery_id
    assert "no transition takes xsm.outbox.failed in 'idle'" in refused.getMessage()
    assert machines["mute"].objects.get("mute:1").version == 1  # nothing was applied
    assert len(handlers.CALLS) == 3
    assert run("xsm_run_outbox", "--once").out.startswith("taken=0 ")  # never again


def test_an_instance_that_is_gone_is_logged(backend: Any, outbox_log: Any) -> None:
    handlers.FAIL["flaky"] = -1
    objects = machines["mute"].objects
    objects.send("mute:1", "PING", create=True)
    objects.forget("mute:1")
    with pytest.raises(CommandError):
        run("xsm_run_outbox", "--once")
    (refused,) = [r for r in outbox_log.records if r.xsm["outcome"] == "compensation refused"]
    assert "'mute:1' does not exist" in refused.getMessage()
    assert not objects.exists("mute:1")  # the compensation created nothing


def test_an_event_no_pattern_takes_is_dead_lettered_at_once(backend: Any, outbox_log: Any) -> None:
    machines["shipment"].objects.send("shipment:1", "NOTE", kind="memo", create=True)
    with pytest.raises(CommandError):
        run("xsm_run_outbox", "--once")
    assert handlers.CALLS == []
    (dead,) = get_outbox().dead_letters()
    assert dead.entry.last_error == (
        "no handler for event type 'note.memo': no pattern of XSM['OUTBOX']['HANDLERS'] matches it"
    )
    (line,) = [r for r in outbox_log.records if r.xsm["outcome"] == "dead-lettered"]
    assert line.levelname == "ERROR" and "note.memo" in line.getMessage()


def test_store_trouble_defers_the_compensation_until_it_can_be_sent(
    backend: Any, outbox_settings: Any, xsm: Any, outbox_log: Any
) -> None:
    outbox_settings(MAX_ATTEMPTS=1)
    xsm(LOCK="pessimistic")
    handlers.FAIL["flaky"] = -1
    objects = machines["mute"].objects
    objects.send("mute:1", "PING", create=True)
    rng = Recorder(0.0)
    w, _base = make_worker(rng, attempts=1)
    with get_store().lock("mute:1"):  # another writer holds the instance
        first = w.run_batch()
    assert (first.deferred, first.dead_lettered) == (1, 0)
    (deferred,) = [r for r in outbox_log.records if r.xsm["outcome"] == "compensation deferred"]
    assert "LockTimeoutError" in deferred.getMessage()
    ((entry, _due),) = get_outbox().waiting()
    assert entry.last_error.startswith("ConnectionError: gateway down")
    second = w.run_batch()
    assert (second.refused, second.dead_lettered) == (1, 1)
    assert len(handlers.CALLS) == 1  # the handler ran once; only the compensation was retried
    (dead,) = get_outbox().dead_letters()
    assert dead.entry.last_error == entry.last_error
