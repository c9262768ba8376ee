"""Audit metadata of the wrong type is refused before any I/O.

``actor``, ``reason`` and ``correlation_id`` are stored in the transition
log by the same commit as the snapshot. A value the log cannot hold
(``None``, ``True``, a list) used to reach the COMMIT script, which failed
at its log write after the snapshot and the indexes were already written:
a half-written commit. Every backend must refuse such a value up front
with :class:`ArgumentTypeError` and leave the store exactly as it was.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError
from django_xsm.persistence import AuditPlugin, IdempotencyPlugin, persisted
from django_xsm.persistence.records import LogEntry
from tests.persistence.test_persisted import state_of
from tests.support import Backends, entry, order_machine, snap, unit

BAD_VALUES = [None, True, 0, [], {"name": "alice"}, b"alice"]


def _plugins(b: Backends) -> list[Any]:
    return [IdempotencyPlugin(b.inbox, principal=lambda e: "acct"), AuditPlugin(b.log)]


@pytest.mark.parametrize("field", ["actor", "correlation_id"])
@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
def test_a_block_with_bad_metadata_is_refused_before_any_write(
    b: Backends, field: str, value: Any
) -> None:
    before = state_of(b, "order:1")
    with pytest.raises(ArgumentTypeError) as err:
        with persisted(b.store, "order:1", order_machine(), plugins=_plugins(b), **{field: value}):
            pytest.fail("the block must not open")
    assert err.value.path == field and err.value.expected == "a str"
    assert f"{field} must be a str, not {type(value).__name__}" in str(err.value)
    assert state_of(b, "order:1") == before


SEND_CASES = [(f, v) for f in ("actor", "correlation_id") for v in BAD_VALUES if v is not None]
SEND_CASES += [("reason", v) for v in BAD_VALUES]  # None is no default for reason


@pytest.mark.parametrize(("field", "value"), SEND_CASES, ids=repr)
def test_a_send_with_bad_metadata_is_refused_and_the_block_commits_nothing(
    b: Backends, field: str, value: Any
) -> None:
    """``None`` is the block's own value for a send's actor/correlation_id."""
    with persisted(b.store, "order:1", order_machine(), plugins=_plugins(b), actor="bob") as o:
        o.send("ADD", actor="alice")
    before = state_of(b, "order:1")
    with pytest.raises(ArgumentTypeError) as err:
        with persisted(b.store, "order:1", order_machine(), plugins=_plugins(b)) as o:
            o.send("ADD", idempotency_key="evt-1", **{field: value})
    assert err.value.path == field
    assert state_of(b, "order:1") == before
    # The key was never claimed: a retry with good metadata runs it.
    with persisted(b.store, "order:1", order_machine(), plugins=_plugins(b)) as o:
        assert o.send("ADD", idempotency_key="evt-1", **{field: "ok"}).accepted
    assert b.store.load("order:1").snapshot["context"]["items"] == 2


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("actor", None),
        ("reason", 1),
        ("event_type", None),
        ("idempotency_key", None),
        ("correlation_id", []),
        ("timestamp_ms", "1"),
        ("timestamp_ms", True),
        ("accepted", 1),
    ],
)
def test_a_log_entry_refuses_fields_the_log_cannot_store(field: str, value: Any) -> None:
    with pytest.raises(ArgumentTypeError) as err:
        entry(**{field: value})
    assert err.value.path == field
    assert isinstance(err.value, TypeError) and isinstance(err.value, InvalidConfigError)


def test_a_commit_whose_log_payload_cannot_be_stored_writes_nothing(b: Backends) -> None:
    """The store-level rule behind the block's: a log entry the log cannot
    encode fails the whole commit before its first write, on every backend
    (the in-memory one used to save the snapshot, then fail in the log)."""
    b.store.commit(unit("order:1", 0, snap(items=1)), inbox=b.inbox, log=b.log)
    before = state_of(b, "order:1")
    bad = LogEntry(
        event_type="ADD",
        payload={"x": object()},
        actor="alice",
        reason="",
        from_state="cart",
        to_state="cart",
        idempotency_key="",
        correlation_id="",
        timestamp_ms=1_800_000_000_000,
    )
    with pytest.raises(TypeError):
        b.store.commit(
            unit("order:1", 1, snap(items=2), log_entries=(entry(), bad)), inbox=b.inbox, log=b.log
        )
    assert state_of(b, "order:1") == before
