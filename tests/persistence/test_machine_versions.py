"""Machine versions: a snapshot saved under another machine version loads
through the machine's migrations, or fails clearly and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import MigrationError
from django_xsm.persistence import PessimisticLock, persisted
from tests.support import ORDER_CHART, Backends


def _add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["items"] += 1


LOGIC = MachineLogic(actions={"add": _add})
V1 = create_machine(ORDER_CHART, logic=LOGIC, version="1")


def to_v2(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {**snapshot, "machine_version": "2", "context": {**snapshot["context"], "cur": "EUR"}}


V2 = create_machine(ORDER_CHART, logic=LOGIC, version="2", migrations={"1": to_v2})


def saved_v1(b: Backends) -> None:
    with persisted(b.store, "o:1", V1) as order:
        order.send("ADD")
    assert b.store.load("o:1").machine_version == "1"


def test_an_older_snapshot_loads_through_the_migrations(b: Backends) -> None:
    saved_v1(b)
    with persisted(b.store, "o:1", V2) as order:
        assert order.context == {"items": 1, "cur": "EUR"} and order.value == "cart"
        order.send("ADD")
    record = b.store.load("o:1")
    assert (record.version, record.machine_version) == (2, "2")
    assert record.snapshot["machine_version"] == "2"
    assert record.snapshot["context"] == {"items": 2, "cur": "EUR"}


def test_reading_an_older_snapshot_migrates_in_memory_and_writes_nothing(b: Backends) -> None:
    saved_v1(b)
    with persisted(b.store, "o:1", V2) as order:
        assert order.context["cur"] == "EUR"
    record = b.store.load("o:1")
    assert (record.version, record.machine_version) == (1, "1")


def test_a_chain_of_migrations_is_followed(b: Backends) -> None:
    saved_v1(b)

    def to_v3(snapshot: dict[str, Any]) -> dict[str, Any]:
        return {**snapshot, "machine_version": "3", "context": {**snapshot["context"], "v3": 1}}

    v3 = create_machine(ORDER_CHART, logic=LOGIC, version="3", migrations={"1": to_v2, "2": to_v3})
    with persisted(b.store, "o:1", v3) as order:
        assert order.context == {"items": 1, "cur": "EUR", "v3": 1}
        order.send("PAY")
    assert b.store.load("o:1").machine_version == "3"


def test_a_missing_migration_fails_clearly_and_writes_nothing(b: Backends) -> None:
    saved_v1(b)
    v9 = create_machine(ORDER_CHART, logic=LOGIC, version="9")
    with pytest.raises(MigrationError) as err:
        with persisted(b.store, "o:1", v9, lock=PessimisticLock(timeout=0)):
            pytest.fail("the body must not run")
    assert (err.value.found_version, err.value.expected_version) == ("1", "9")
    record = b.store.load("o:1")
    assert (record.version, record.machine_version) == (1, "1")
    assert b.store.lock_holder("o:1") is None


def test_a_migration_that_returns_garbage_is_a_migration_error(b: Backends) -> None:
    saved_v1(b)

    def broken(snapshot: dict[str, Any]) -> dict[str, Any]:
        return {**snapshot, "machine_version": "2", "value": "nowhere"}

    v2 = create_machine(ORDER_CHART, logic=LOGIC, version="2", migrations={"1": broken})
    with pytest.raises(MigrationError):
        with persisted(b.store, "o:1", v2):
            pass
    assert b.store.load("o:1").version == 1


def test_a_chart_changed_without_a_version_bump_is_refused(b: Backends) -> None:
    saved_v1(b)
    states = {**ORDER_CHART["states"], "refunded": {}}
    changed = create_machine({**ORDER_CHART, "states": states}, logic=LOGIC, version="1")
    with pytest.raises(MigrationError, match="structure"):
        with persisted(b.store, "o:1", changed):
            pass
    assert b.store.load("o:1").version == 1
