"""AuditPlugin writes the transition log (processed events only, redacted)
and replay() rebuilds an instance from it or names the field that diverged."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import InvalidConfigError, ReplayDivergenceError
from django_xsm.persistence import (
    DEFAULT_REDACT,
    AuditPlugin,
    TransitionRecord,
    persisted,
    redact,
    replay,
)
from django_xsm.persistence.audit import REDACTED
from tests.persistence.conftest import block_clock
from tests.support import ORDER_CHART, BackendFactory, Backends, order_machine

M = order_machine()


def run(b: Backends, key: str, *events: tuple[str, dict[str, Any]], **block: Any) -> None:
    with persisted(b.store, key, M, plugins=[AuditPlugin(b.log)], **block) as order:
        for etype, payload in events:
            order.send(etype, **payload)


def test_the_log_records_processed_events_only_with_who_why_and_where(b: Backends) -> None:
    clock = block_clock(b)
    with persisted(
        b.store, "o:1", M, plugins=[AuditPlugin(b.log)], actor="alice", correlation_id="req-9"
    ) as order:
        order.send("ADD", n=2)
        order.send("SHIP")  # refused in cart: not processed, not logged
        clock.advance(5)
        order.send("PAY", actor="bob", reason="checkout", correlation_id="req-10")
    records = b.log.read("o:1")
    assert [
        (r.seq, r.version, r.event_type, r.actor, r.reason, r.correlation_id) for r in records
    ] == [(1, 1, "ADD", "alice", "", "req-9"), (2, 1, "PAY", "bob", "checkout", "req-10")]
    assert [(r.from_state, r.to_state, r.accepted) for r in records] == [
        ("cart", "cart", True), ("cart", "paid", True),
    ]  # fmt: skip
    assert [r.timestamp_ms - clock.now for r in records] == [-5, 0]
    assert records[0].payload == {"n": 2} and records[1].payload == {}


def test_log_seq_follows_commit_order_and_carries_the_version_produced(b: Backends) -> None:
    run(b, "o:1", ("ADD", {}))
    run(b, "o:1", ("ADD", {}), ("SHIP", {}))  # the refusal adds nothing
    run(b, "o:1")  # a read: no record
    run(b, "o:1", ("PAY", {}))
    assert [(r.seq, r.version, r.event_type) for r in b.log.read("o:1")] == [
        (1, 1, "ADD"), (2, 2, "ADD"), (3, 3, "PAY"),
    ]  # fmt: skip
    assert b.store.load("o:1").version == 3


def test_redaction_hides_secrets_by_default_nested_and_in_lists(b: Backends) -> None:
    payload = {
        "password": "hunter2",
        "card_number": "4242424242424242",
        "cardNumber": "4242",
        "user": {"name": "al", "api-key": "k", "Authorization": "Bearer x"},
        "cards": [{"pan": "4242", "cvv": "123", "company": "acme"}],
        "spinner": True,
        "oauth_token": "t",
    }
    run(b, "o:1", ("ADD", payload))
    logged = b.log.read("o:1")[0].payload
    assert logged == {
        "password": REDACTED,
        "card_number": REDACTED,
        "cardNumber": REDACTED,
        "user": {"name": "al", "api-key": REDACTED, "Authorization": REDACTED},
        "cards": [{"pan": REDACTED, "cvv": REDACTED, "company": "acme"}],
        "spinner": True,
        "oauth_token": REDACTED,
    }
    assert b.store.load("o:1").snapshot["context"] == {"items": 1}  # the action saw the clear data
    assert "password" in DEFAULT_REDACT and redact(["x", {"secret": 1}]) == [
        "x",
        {"secret": REDACTED},
    ]


def test_redaction_is_extended_by_names_or_replaced_by_a_callable(b: Backends) -> None:
    with persisted(b.store, "o:1", M, plugins=[AuditPlugin(b.log, redact=["sku", "Email"])]) as o:
        o.send("ADD", sku="A-1", email="a@b.c", password="p", note="ok")
    assert b.log.read("o:1")[0].payload == {
        "sku": REDACTED, "email": REDACTED, "password": REDACTED, "note": "ok",
    }  # fmt: skip

    def only_notes(payload: Any) -> dict[str, Any]:
        return {k: v for k, v in payload.items() if k == "note"}

    with persisted(b.store, "o:1", M, plugins=[AuditPlugin(b.log, redact=only_notes)]) as o:
        o.send("ADD", password="p", note="kept")
    assert b.log.read("o:1")[1].payload == {"note": "kept"}
    with pytest.raises(InvalidConfigError):
        with persisted(b.store, "o:2", M, plugins=[AuditPlugin(b.log, redact=lambda p: "x")]) as o:
            o.send("ADD")
    assert b.store.load("o:2") is None


def test_payload_values_json_cannot_hold_are_logged_exactly(b: Backends) -> None:
    payload = {
        "amount": decimal.Decimal("10.50"),
        "at": dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "dims": (1, 2),
        "raw": {"$xsm": "decimal", "v": "1"},  # user data that looks like a tag
    }
    run(b, "o:1", ("ADD", payload))
    assert b.log.read("o:1")[0].payload == payload
    with pytest.raises(TypeError, match=r"\$\.payload\.bad"):
        run(b, "o:1", ("ADD", {"bad": {1, 2}}))
    assert len(b.log.read("o:1")) == 1 and b.store.load("o:1").version == 1


def test_replay_rebuilds_the_stored_state(b: Backends) -> None:
    run(b, "o:1", ("ADD", {"n": 2, "amount": decimal.Decimal("1.5")}), ("ADD", {}))
    run(b, "o:1", ("PAY", {"password": "p"}))
    run(b, "o:1", ("SHIP", {}))
    rebuilt = replay(b.log, M, "o:1")
    stored = b.store.load("o:1").snapshot
    assert (rebuilt.value, rebuilt.context, rebuilt.status) == (
        stored["value"], stored["context"], stored["status"],
    )  # fmt: skip
    assert rebuilt.value == "shipped" and rebuilt.context == {"items": 3}


def test_replay_from_a_snapshot_and_after_seq(b: Backends) -> None:
    run(b, "o:1", ("ADD", {}), ("ADD", {}))
    checkpoint = b.store.load("o:1")
    seq = b.log.read("o:1")[-1].seq
    run(b, "o:1", ("ADD", {"n": 5}), ("PAY", {}))
    rebuilt = replay(b.log, M, "o:1", checkpoint, after_seq=seq)
    assert rebuilt.value == "paid" and rebuilt.context == {"items": 7}
    as_dict = replay(b.log, M, "o:1", dict(checkpoint.snapshot), after_seq=seq)
    assert as_dict.context == {"items": 7}
    with pytest.raises(ReplayDivergenceError) as err:
        replay(b.log, M, "o:1", checkpoint, after_seq=seq - 1)  # would apply an ADD twice
    assert (err.value.field, err.value.seq, err.value.actual) == ("version", seq, 1)


def test_replay_from_a_snapshot_accepts_unchanged_events_of_its_version(b: Backends) -> None:
    run(b, "o:1", ("ADD", {}))
    checkpoint = b.store.load("o:1")
    run(b, "o:1", ("NOOP", {}))  # accepted, changes nothing: logged at version 1
    run(b, "o:1", ("PAY", {}))
    assert [(r.event_type, r.version) for r in b.log.read("o:1")][1:] == [("NOOP", 1), ("PAY", 2)]
    assert replay(b.log, M, "o:1", checkpoint, after_seq=1).value == "paid"


def _append(b: Backends, key: str, **fields: Any) -> None:
    last = b.log.read(key)[-1]
    data = {**last.to_dict(), "seq": last.seq + 1, **fields}
    b.log.append(TransitionRecord(**data))


@pytest.mark.parametrize(
    ("tamper", "field"),
    [
        ({"event_type": "PAY", "from_state": "cart", "to_state": "shipped"}, "to_state"),
        ({"event_type": "SHIP", "from_state": "paid", "to_state": "shipped"}, "from_state"),
        ({"event_type": "SHIP", "from_state": "cart", "to_state": "cart"}, "accepted"),
    ],
    ids=["to_state", "from_state", "accepted"],
)
def test_replay_names_the_field_of_a_tampered_record(
    b: Backends, tamper: dict[str, Any], field: str
) -> None:
    run(b, "o:1", ("ADD", {}))
    _append(b, "o:1", **tamper)
    with pytest.raises(ReplayDivergenceError) as err:
        replay(b.log, M, "o:1")
    assert (err.value.field, err.value.seq, err.value.key) == (field, 2, "o:1")


def test_replay_of_a_log_written_by_another_chart_diverges(b: Backends) -> None:
    run(b, "o:1", ("ADD", {}), ("PAY", {}))
    other_chart = {
        **ORDER_CHART,
        "states": {**ORDER_CHART["states"], "cart": {"on": {"ADD": "paid"}}},
    }
    other = create_machine(other_chart, logic=MachineLogic())
    with pytest.raises(ReplayDivergenceError) as err:
        replay(b.log, other, "o:1")
    assert (err.value.field, err.value.seq, err.value.expected) == ("to_state", 1, "cart")


def test_replay_refuses_to_start_from_the_middle_of_a_trimmed_log(make: BackendFactory) -> None:
    b = make(maxlen=5)
    for _ in range(3):
        run(b, "o:1", *[("ADD", {})] * 100)
    records = b.log.read("o:1")
    assert records[0].seq > 1 and records[-1].seq == 300
    with pytest.raises(ReplayDivergenceError) as err:
        replay(b.log, M, "o:1")
    assert (err.value.field, err.value.expected, err.value.actual) == ("seq", 1, records[0].seq)
    # With a snapshot taken at or after the trim point, replay works.
    checkpoint = b.store.load("o:1")
    assert replay(b.log, M, "o:1", checkpoint, after_seq=300).context == {"items": 300}


def test_replay_of_a_purged_log_needs_a_snapshot(b: Backends) -> None:
    clock = block_clock(b)
    run(b, "o:1", ("ADD", {}))
    clock.advance(10_000)
    run(b, "o:1", ("ADD", {}))
    assert b.log.purge_older_than((clock.now - 5_000) / 1000, key="o:1") == 1
    with pytest.raises(ReplayDivergenceError) as err:
        replay(b.log, M, "o:1")
    assert err.value.field == "seq"


def test_an_event_whose_payload_cannot_be_logged_does_not_run(b: Backends) -> None:
    """Caught inside the block, it must not commit without its record."""
    with persisted(b.store, "o:1", M, plugins=[AuditPlugin(b.log)]) as order:
        with pytest.raises(TypeError, match=r"\$\.payload\.tags"):
            order.send("ADD", tags={"a", "b"})
        assert order.context == {"items": 0}
        order.send("ADD")
    assert b.store.load("o:1").snapshot["context"] == {"items": 1}
    assert [r.payload for r in b.log.read("o:1")] == [{}]
