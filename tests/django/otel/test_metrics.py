"""The django_xsm meter: commits, conflicts, lock waits, idempotent replays
and operation durations, read back through the SDK's in-memory reader."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.trace import StatusCode

from django_xsm.exceptions import ConflictError, LockTimeoutError
from django_xsm.persistence import (
    IdempotencyPlugin,
    MemoryInbox,
    MemoryStore,
    PessimisticLock,
    persisted,
)
from tests.django.otel.support import Telemetry
from tests.django.otel.test_spans import MACHINE


def test_commits_count_blocks_that_wrote(telemetry: Telemetry) -> None:
    store, plugin = MemoryStore(), telemetry.plugin()
    for _ in range(3):
        with persisted(store, "order:1", MACHINE, plugins=[plugin]) as order:
            order.send("ADD")
    with persisted(store, "order:1", MACHINE, plugins=[plugin]):
        pass  # a read commits nothing
    assert telemetry.count("xsm.commits") == 3
    assert telemetry.count("xsm.commits", xsm_machine="order") == 3
    count, total = telemetry.histogram("xsm.operation.duration")
    assert count == 3 * 3 + 2 and total > 0  # 4 opens, 3 sends, 4 commit phases
    assert telemetry.count_points("xsm.operation.duration", xsm_operation="send") == 3


def test_conflicts_count_by_reason(telemetry: Telemetry) -> None:
    store, plugin = MemoryStore(), telemetry.plugin()
    with pytest.raises(ConflictError):
        with persisted(store, "order:1", MACHINE, plugins=[plugin]) as late:
            with persisted(store, "order:1", MACHINE) as first:
                first.send("ADD")
            late.send("ADD")
    assert telemetry.count("xsm.conflicts", xsm_reason="version") == 1
    assert telemetry.count("xsm.commits") == 0
    assert telemetry.count_points("xsm.operation.duration", xsm_outcome="error") == 1


def test_a_lock_timeout_fails_the_open_and_counts_a_wait(telemetry: Telemetry) -> None:
    store, plugin = MemoryStore(), telemetry.plugin()
    with persisted(store, "order:1", MACHINE, lock=PessimisticLock(timeout=5)):
        with pytest.raises(LockTimeoutError):
            with persisted(
                store, "order:1", MACHINE, plugins=[plugin], lock=PessimisticLock(timeout=0.05)
            ):
                pass
    opened = telemetry.span("xsm.open")
    assert opened.status.status_code is StatusCode.ERROR
    assert opened.attributes is not None
    assert opened.attributes["xsm.lock"] == "pessimistic"
    assert opened.attributes["error.type"] == "LockTimeoutError"
    assert int(opened.attributes["xsm.lock.polls"]) >= 1  # type: ignore[call-overload]
    assert telemetry.count("xsm.lock.waits", xsm_outcome="timeout") == 1
    assert telemetry.count("xsm.lock.waits", xsm_outcome="acquired") == 0


def test_a_lock_acquired_after_waiting_counts_a_wait(telemetry: Telemetry) -> None:
    store, plugin = MemoryStore(), telemetry.plugin()
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with persisted(store, "order:1", MACHINE, lock=PessimisticLock(timeout=5)) as order:
            order.send("ADD")
            holding.set()
            time.sleep(0.15)
        done.set()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(5)
    with persisted(
        store, "order:1", MACHINE, plugins=[plugin], lock=PessimisticLock(timeout=5)
    ) as order:
        order.send("ADD")
    holder.join(5)
    assert done.is_set()
    opened = telemetry.span("xsm.open")
    assert opened.status.status_code is StatusCode.UNSET
    assert opened.attributes is not None and int(opened.attributes["xsm.lock.polls"]) >= 1  # type: ignore[call-overload]
    assert opened.attributes["xsm.version"] == 1
    assert telemetry.count("xsm.lock.waits", xsm_outcome="acquired") == 1
    assert telemetry.count("xsm.commits") == 1


def test_an_unbusy_lock_counts_no_wait(telemetry: Telemetry) -> None:
    store, plugin = MemoryStore(), telemetry.plugin()
    with persisted(store, "order:1", MACHINE, plugins=[plugin], lock=PessimisticLock()) as order:
        order.send("ADD")
    assert telemetry.points("xsm.lock.waits") == []
    assert "xsm.lock.polls" not in (telemetry.span("xsm.open").attributes or {})


def test_replays_count_per_scope(telemetry: Telemetry) -> None:
    store = MemoryStore()
    inbox = MemoryInbox(store)
    plugins = [IdempotencyPlugin(inbox), telemetry.plugin()]
    for _ in range(3):
        with persisted(store, "order:1", MACHINE, plugins=plugins) as order:
            order.send("ADD", idempotency_key="evt-1")
    assert telemetry.count("xsm.idempotency.replays", xsm_scope="send") == 2
    for _ in range(2):
        with persisted(store, "order:1", MACHINE, plugins=plugins, idempotency_key="b") as order:
            order.send("ADD")
            order.send("ADD")
    # the second block is one replay, however many sends it repeats
    assert telemetry.count("xsm.idempotency.replays", xsm_scope="block") == 1
    assert telemetry.count("xsm.idempotency.replays") == 3
    assert telemetry.count("xsm.commits") == 2
