"""An outbox reader's observers: each lease taken and how each ended
(ack, ack_many, fail), the process's observers unless the reader has its
own of the class; an observer's error is logged and changes nothing the
reader returns."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from django_xsm.persistence.outbox import (
    OutboxLease,
    OutboxObserver,
    add_process_observer,
    process_observers,
    remove_process_observer,
)
from django_xsm.redis import RedisOutbox, RedisStore
from tests.redis.outbox_worker import commit
from tests.support import fakeredis_client


class Recorder(OutboxObserver):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def taken(self, outbox: Any, leases: Sequence[OutboxLease]) -> None:
        self.seen.append(("taken", len(leases)))

    def ended(self, outbox: Any, lease: OutboxLease, outcome: str) -> None:
        self.seen.append((outcome, lease.entry.key))


class Broken(OutboxObserver):
    def taken(self, outbox: Any, leases: Sequence[OutboxLease]) -> None:
        raise RuntimeError("taken hook broke")

    def ended(self, outbox: Any, lease: OutboxLease, outcome: str) -> None:
        raise RuntimeError("ended hook broke")


def _outbox(prefix: str, *keys: str, **kw: Any) -> RedisOutbox:
    client = fakeredis_client()
    store = RedisStore(client, prefix=prefix, buckets=1)
    for key in keys:
        commit(store, key, "PING")  # emits order.created and pong
    return RedisOutbox(client, prefix=prefix, buckets=1, **kw)


def test_an_observers_error_is_logged_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    outbox = _outbox("obs-err", "k:1", "k:2", observers=(Broken(), recorder))
    with caplog.at_level(logging.ERROR, logger="django_xsm.outbox"):
        leases = outbox.take("w", count=3)  # k:1's two entries, k:2's first
        assert len(leases) == 3
        assert outbox.ack(leases[0]) is True
        assert outbox.ack_many(leases[:2]) == [False, True]
        assert outbox.fail(leases[2], "boom", retry_at_ms=None) == "dead"
    assert len(caplog.records) == 5  # take, ack, two in ack_many, fail
    assert all("outbox observer" in r.getMessage() for r in caplog.records)
    assert recorder.seen == [
        ("taken", 3),
        ("delivered", "k:1"),
        ("lost", "k:1"),
        ("delivered", "k:1"),
        ("dead", "k:2"),
    ]


def test_process_observers_reach_every_reader_unless_it_has_its_own() -> None:
    shared, own = Recorder(), Recorder()
    plain = _outbox("obs-plain", "k:1")  # built before the registration
    mine = _outbox("obs-mine", "k:1", observers=(own,))
    add_process_observer(shared)
    add_process_observer(shared)  # idempotent
    try:
        assert process_observers() == (shared,)
        plain.take("w")
        mine.take("w")
    finally:
        remove_process_observer(shared)
    assert process_observers() == ()
    assert shared.seen == [("taken", 2)] and own.seen == [("taken", 2)]
    plain.take("w")
    assert shared.seen == [("taken", 2)]
    with pytest.raises(TypeError):
        add_process_observer(object())  # type: ignore[arg-type]
