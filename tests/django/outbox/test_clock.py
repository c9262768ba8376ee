"""django-xsm's clock (``django_xsm.backend.use_clock`` / ``now_ms``): the
one time blocks arm deadlines with, the timer scanner judges them by and
the outbox worker computes retries on; with a clock set, the worker also
judges by it when a retry is due (the Redis server's clock otherwise).
On the embedded fakeredis and, with ``XSM_REDIS_URL``, the live server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm import backend as stores
from django_xsm.backend.build import get_outbox
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError
from django_xsm.outbox import HandlerTable, OutboxWorker, drain
from django_xsm.persistence.base import system_clock_ms
from django_xsm.registry import machines
from tests.django.outbox import handlers
from tests.django.outbox.conftest import Recorder

DAY_MS = 86_400_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Iterator[Clock]:
    found = Clock(system_clock_ms() + DAY_MS)  # a day ahead of every server
    stores.use_clock(found)
    try:
        yield found
    finally:
        stores.use_clock(None)


def test_the_wall_clock_unless_one_is_set(backend: Any) -> None:
    assert not stores.clock_is_set()
    before = system_clock_ms()
    assert before <= stores.now_ms() <= system_clock_ms()
    assert stores.get_store().clock is stores.now_ms
    stores.use_clock(lambda: 5)
    try:
        assert stores.clock_is_set() and stores.now_ms() == 5
        assert stores.get_store().clock() == 5
    finally:
        stores.use_clock(None)
    assert not stores.clock_is_set()


def test_a_clock_must_be_callable() -> None:
    with pytest.raises(ArgumentTypeError, match="clock must be a callable"):
        stores.use_clock(5)  # type: ignore[arg-type]
    assert not stores.clock_is_set()


def test_blocks_arm_deadlines_and_stamp_the_log_on_the_clock_that_is_set(
    backend: Any, clock: Clock
) -> None:
    objects = machines["ticket"].objects
    objects.send("t:1", "BUMP", create=True)
    view = objects.get("t:1")
    assert [d.due_ms for d in view.deadlines] == [clock.now + 60_000]
    assert objects.history("t:1")[-1].timestamp_ms == clock.now


async def test_async_blocks_read_the_same_clock(backend: Any, clock: Clock) -> None:
    assert stores.get_async_backend().store.clock is stores.now_ms
    async with machines["ticket"].objects.aopen("t:2") as block:
        block.send("BUMP")
    view = await machines["ticket"].objects.aget("t:2")
    assert [d.due_ms for d in view.deadlines] == [clock.now + 60_000]


def test_the_scanner_fires_what_is_due_by_the_clock_that_is_set(backend: Any, clock: Clock) -> None:
    objects = machines["ticket"].objects
    objects.send("t:3", "BUMP", create=True)
    scanner = stores.get_scanner()
    assert scanner.scan().fired == 0
    clock.now += 60_000
    assert scanner.scan().fired == 1
    assert objects.get("t:3").value == "stale"


def test_retries_are_due_by_the_clock_that_is_set(
    backend: Any, clock: Clock, outbox_settings: Any
) -> None:
    outbox_settings(BACKOFF_S=1.0)
    handlers.FAIL["flaky"] = 1
    machines["shipment"].objects.send("shipment:1", "PAY", create=True)
    worker = OutboxWorker.from_settings(consumer="w", rng=Recorder(1.0))
    assert worker.due_by_clock and worker.clock is stores.now_ms
    worker.handlers = HandlerTable({"order.paid": handlers.flaky})
    first = drain(worker)
    assert (first.taken, first.retried) == (1, 1)
    ((_entry, due),) = get_outbox().waiting()
    assert due == clock.now + 1000  # the whole first backoff (BACKOFF_S 1) on the clock set
    # a day after the server's clock, but not yet by the one that is set
    clock.now = due - 1
    assert drain(worker).taken == 0
    clock.now = due
    again = drain(worker)
    assert (again.taken, again.delivered) == (1, 1)
    assert [c[2].attempt for c in handlers.CALLS] == [1, 2]


def test_without_a_clock_retries_are_due_by_the_servers(backend: Any) -> None:
    worker = OutboxWorker.from_settings(consumer="w", rng=Recorder(0.0))
    assert not worker.due_by_clock
    handlers.FAIL["flaky"] = 1
    machines["shipment"].objects.send("shipment:1", "PAY", create=True)
    worker.handlers = HandlerTable({"order.paid": handlers.flaky})
    worker.clock = lambda: system_clock_ms() + DAY_MS  # retry times a day ahead
    assert drain(worker).retried == 1
    assert drain(worker).taken == 0  # the server's clock says: not yet


@pytest.mark.parametrize("bad", [-1, True, 1.5, "1"])
def test_take_refuses_a_bad_now(backend: Any, bad: Any) -> None:
    with pytest.raises(InvalidConfigError, match="now_ms must be an int >= 0"):
        get_outbox().take("w", now_ms=bad)
