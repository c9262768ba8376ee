"""Emitted events ride the commit (docs/outbox.md, "The guarantee").

On every backend: what a block's actions emitted is written by the same
commit as the snapshot, in order, stamped with the key, machine and the
version that commit produced, each under a stable delivery id; a block that
commits nothing emits nothing. On Redis the entries are in the bucket's
outbox stream, written by the COMMIT script itself (so still two round
trips).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import ConflictError, EventNotAcceptedError, UnstorableValueError
from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, persisted
from django_xsm.persistence.outbox import OutboxEntry
from tests.support import Backends, backend_factory

FLAVOURS = ["memory", "fakeredis", pytest.param("live", marks=pytest.mark.live)]

CHART: dict[str, Any] = {
    "id": "order",
    "initial": "new",
    "context": {"amount": 0},
    "states": {
        "new": {
            "on": {
                "PAY": {"target": "paid", "actions": "pay"},
                "NOTE": {"actions": {"type": "xstate.emit", "event": {"type": "order.noted"}}},
                "BAD": {"actions": "bad"},
            }
        },
        "paid": {"on": {"SHIP": {"target": "shipped", "actions": "ship"}}},
        "shipped": {"type": "final"},
    },
}


def _pay(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["amount"] = event.data.get("amount", 0)
    instance.emit({"type": "order.paid", "amount": ctx["amount"]})


def _ship(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    instance.emit({"type": "order.shipped"})
    instance.emit({"type": "mail.queued", "to": "buyer"})


def _bad(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    instance.emit({"type": "bad", "value": float("nan")})


MACHINE = create_machine(
    CHART, logic=MachineLogic(actions={"pay": _pay, "ship": _ship, "bad": _bad})
)


@pytest.fixture(params=FLAVOURS)
def b(request: pytest.FixtureRequest) -> Iterator[Backends]:
    factories = backend_factory(str(request.param))
    make = next(factories)
    yield make()
    next(factories, None)  # deletes a live namespace


def outbox(b: Backends) -> list[OutboxEntry]:
    """Every entry in the outbox, in commit order."""
    layout = b.store.layout
    rows = []
    for bucket in range(layout.buckets):
        for stream_id, f in b.client.xrange(layout.outbox(bucket)):
            fields = {k.decode(): v.decode() for k, v in f.items()}
            rows.append((stream_id, fields))
    rows.sort()
    return [
        OutboxEntry(
            fields["id"],
            fields["k"],
            fields["m"],
            int(fields["v"]),
            json.loads(fields["e"]),
            attempts=int(fields["a"]),
            emitted_ms=int(fields["t"]),
        )
        for _, fields in rows
    ]


def test_emitted_events_are_committed_in_order_with_key_machine_and_version(b: Backends):
    with persisted(b.store, "order:1", MACHINE) as inst:
        inst.send("PAY", amount=10)
    with persisted(b.store, "order:1", MACHINE) as inst:
        inst.send("SHIP")
    entries = outbox(b)
    assert [e.event for e in entries] == [
        {"type": "order.paid", "amount": 10},
        {"type": "order.shipped"},
        {"type": "mail.queued", "to": "buyer"},
    ]
    assert [(e.key, e.machine, e.version, e.attempts) for e in entries] == [
        ("order:1", "order", 1, 0),
        ("order:1", "order", 2, 0),
        ("order:1", "order", 2, 0),
    ]
    assert entries[1].delivery_id.endswith("-0") and entries[2].delivery_id.endswith("-1")
    assert entries[1].delivery_id[:-2] == entries[2].delivery_id[:-2]  # one commit
    assert len({e.delivery_id for e in entries}) == 3
    assert all(e.emitted_ms > 0 for e in entries)


def test_an_emit_only_transition_commits_and_moves_the_version(b: Backends):
    with persisted(b.store, "order:2", MACHINE) as inst:
        inst.send("NOTE")
    with persisted(b.store, "order:2", MACHINE) as inst:
        inst.send("NOTE")
    record = b.store.load("order:2")
    assert record is not None and record.version == 2
    assert [e.version for e in outbox(b)] == [1, 2]


def test_a_block_that_commits_nothing_emits_nothing(b: Backends):
    with pytest.raises(RuntimeError):
        with persisted(b.store, "order:3", MACHINE) as inst:
            inst.send("PAY", amount=1)
            raise RuntimeError("the view failed after the event")
    with pytest.raises(EventNotAcceptedError):
        with persisted(b.store, "order:3", MACHINE, strict=True) as inst:
            inst.send("SHIP")  # refused in 'new'
    assert outbox(b) == [] and b.store.load("order:3") is None


def test_an_unstorable_emitted_event_fails_the_commit_before_any_write(b: Backends):
    with pytest.raises(UnstorableValueError):
        with persisted(b.store, "order:4", MACHINE) as inst:
            inst.send("BAD")
    assert outbox(b) == [] and b.store.load("order:4") is None


def test_a_replayed_request_emits_once(b: Backends):
    plugins = [IdempotencyPlugin(b.inbox), AuditPlugin(b.log)]
    for _ in range(2):
        with persisted(b.store, "order:5", MACHINE, plugins=plugins) as inst:
            inst.send("PAY", amount=7, idempotency_key="pay-1")
    assert [e.event["type"] for e in outbox(b)] == ["order.paid"]


def test_a_payload_member_named_strict_is_payload(b: Backends):
    plugins = [AuditPlugin(b.log)]
    with persisted(b.store, "order:6", MACHINE, plugins=plugins) as inst:
        inst.send({"type": "PAY", "amount": 2, "strict": False})  # payload, not the option
    (record,) = b.log.read("order:6")
    assert record.payload == {"amount": 2, "strict": False}


#: Its initial state emits on entry and arms a 5 s timer.
OPENING = create_machine(
    {
        "id": "desk",
        "initial": "open",
        "states": {
            "open": {
                "entry": {"type": "xstate.emit", "event": {"type": "desk.opened"}},
                "after": {"5000": "late"},
            },
            "late": {},
        },
    }
)


def test_save_created_commits_a_started_instance_with_its_deadline_and_entry_events(
    b: Backends,
):
    with persisted(b.store, "desk:1", OPENING) as desk:
        assert desk.created
        desk.save_created()  # nothing is sent: the start alone is committed
    record = b.store.load("desk:1")
    assert record is not None and record.version == 1 and record.snapshot["value"] == "open"
    [(key, due_ms)] = b.store.due_keys(10**10)  # in the due index: the scanner finds it
    assert key == "desk:1" and due_ms == record.snapshot["deadlines"][0]["due_ms"]
    assert [(e.event, e.version) for e in outbox(b)] == [({"type": "desk.opened"}, 1)]
    with persisted(b.store, "desk:1", OPENING) as desk:
        desk.save_created()  # a stored instance: nothing to write
    assert b.store.load("desk:1").version == 1 and len(outbox(b)) == 1


def test_two_blocks_that_start_the_same_instance_commit_it_once(b: Backends):
    first, second = persisted(b.store, "desk:2", OPENING), persisted(b.store, "desk:2", OPENING)
    for block in (first.__enter__(), second.__enter__()):
        block.save_created()
    first.__exit__(None, None, None)
    with pytest.raises(ConflictError) as lost:
        second.__exit__(None, None, None)
    assert (lost.value.expected, lost.value.actual) == (0, 1)
    assert b.store.load("desk:2").version == 1
    assert [e.event for e in outbox(b)] == [{"type": "desk.opened"}]  # one initial entry
