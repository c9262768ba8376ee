"""Snapshots: format, restore, corruption, structure hash, migrations."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import MigrationError, SnapshotCorruptError

from .conftest import ORDER, ORDER_LOGIC

KEYS = {
    "schema",
    "machine_id",
    "machine_version",
    "structure",
    "value",
    "context",
    "status",
    "history",
    "deadlines",
    "entry_seq",
}


def machine(**kw: Any) -> Any:
    return create_machine(ORDER, logic=ORDER_LOGIC, **kw)


def test_snapshot_format_is_json_ready() -> None:
    inst = machine(version="3").start()
    inst.send("ADD")
    snap = inst.snapshot()
    assert set(snap) == KEYS
    assert json.loads(json.dumps(snap)) == snap
    assert snap["schema"] == 1
    assert snap["machine_id"] == "order" and snap["machine_version"] == "3"
    assert snap["structure"] == inst.machine.structure_hash
    assert (snap["value"], snap["context"], snap["status"]) == ("cart", {"items": 1}, "active")
    assert (snap["history"], snap["deadlines"], snap["entry_seq"]) == ({}, [], 0)


def test_snapshot_shares_nothing_with_the_instance() -> None:
    inst = create_machine(
        {"id": "m", "initial": "a", "context": {"deep": {"list": [1]}}, "states": {"a": {}}}
    ).start()
    snap = inst.snapshot()
    snap["context"]["deep"]["list"].append(2)
    assert inst.context == {"deep": {"list": [1]}}


def test_restore_runs_no_actions_and_round_trips() -> None:
    calls: list[str] = []
    m = create_machine(
        {"id": "m", "initial": "a", "context": {"n": 1}, "states": {"a": {"entry": "e"}}},
        logic=MachineLogic(actions={"e": lambda i, c, e, a: calls.append(e.type)}),
    )
    snap = m.start().snapshot()
    assert calls == ["xstate.init"]
    restored = m.restore(json.loads(json.dumps(snap)))
    assert calls == ["xstate.init"]
    assert restored.snapshot() == snap


def test_restore_does_not_mutate_or_alias_its_input() -> None:
    m = machine()
    snap = m.start().snapshot()
    frozen = copy.deepcopy(snap)
    inst = m.restore(snap)
    inst.send("ADD")
    assert snap == frozen


def test_structure_hash_is_stable_and_ignores_logic() -> None:
    a = create_machine(ORDER, logic=ORDER_LOGIC).structure_hash
    b = create_machine(copy.deepcopy(ORDER), logic=ORDER_LOGIC).structure_hash
    assert a == b and len(a) == 32 and int(a, 16) >= 0
    renamed_action = copy.deepcopy(ORDER)
    renamed_action["states"]["cart"]["on"]["ADD"] = {"actions": "add2"}
    c = create_machine(
        renamed_action,
        logic=MachineLogic(actions={"add2": print}),
    ).structure_hash
    assert c == a
    moved = copy.deepcopy(ORDER)
    moved["states"]["paid"]["on"]["SHIP"] = "cart"
    assert create_machine(moved, logic=ORDER_LOGIC).structure_hash != a


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda s: [s], "expected a dict"),
        (lambda s: {k: v for k, v in s.items() if k != "value"}, "missing key(s) value"),
        (lambda s: {**s, "schema": 99}, "unknown schema"),
        (lambda s: {**s, "machine_id": "other"}, "belongs to machine 'other'"),
        (lambda s: {**s, "machine_version": 1}, "machine_version must be a string"),
        (lambda s: {**s, "value": "nowhere"}, "no child state 'nowhere'"),
        (lambda s: {**s, "value": {"cart": "x"}}, "has no children"),
        (lambda s: {**s, "context": []}, "context must be a dict"),
        (lambda s: {**s, "status": "stopped"}, "status must be"),
        (lambda s: {**s, "entry_seq": -1}, "entry_seq"),
        (lambda s: {**s, "history": {"order.cart": []}}, "not a history state"),
        (lambda s: {**s, "deadlines": [{"state_id": "order.cart"}]}, "deadlines[0]"),
        (lambda s: {**s, "deadlines": "none"}, "deadlines must be a list"),
    ],
)
def test_malformed_snapshots_are_corrupt(mutate: Any, needle: str) -> None:
    m = machine()
    snap = m.start().snapshot()
    with pytest.raises(SnapshotCorruptError) as info:
        m.restore(mutate(snap))
    assert needle in str(info.value)


def test_deadline_must_belong_to_an_active_state() -> None:
    config = {
        "id": "t",
        "initial": "a",
        "states": {"a": {"after": {"10": "b"}}, "b": {"on": {"BACK": "a"}}},
    }
    m = create_machine(config)
    snap = m.start(clock=lambda: 0).snapshot()
    moved = {**snap, "value": "b"}
    with pytest.raises(SnapshotCorruptError, match="not active"):
        m.restore(moved)
    wrong_seq = {**snap, "entry_seq": 0}
    with pytest.raises(SnapshotCorruptError, match="entry"):
        m.restore(wrong_seq)


def test_same_version_different_structure_needs_a_version_bump() -> None:
    old = machine(version="1").start().snapshot()
    changed = copy.deepcopy(ORDER)
    changed["states"]["refunded"] = {}
    with pytest.raises(MigrationError) as info:
        create_machine(changed, logic=ORDER_LOGIC, version="1").restore(old)
    assert "bump the machine version" in str(info.value)
    assert info.value.found_version == info.value.expected_version == "1"


def test_migrations_chain_until_the_current_version() -> None:
    old = machine(version="1").start().snapshot()
    old["value"] = "paid"
    v3 = copy.deepcopy(ORDER)
    v3["states"]["settled"] = v3["states"].pop("paid")
    v3["states"]["cart"]["on"]["PAY"] = "settled"

    def one_to_two(s: dict[str, Any]) -> dict[str, Any]:
        return {**s, "machine_version": "2", "context": {**s["context"], "currency": "EUR"}}

    def two_to_three(s: dict[str, Any]) -> dict[str, Any]:
        value = "settled" if s["value"] == "paid" else s["value"]
        return {**s, "machine_version": "3", "value": value}

    m3 = create_machine(
        v3, logic=ORDER_LOGIC, version="3", migrations={"1": one_to_two, "2": two_to_three}
    )
    inst = m3.restore(old)
    assert inst.value == "settled"
    assert inst.context == {"items": 0, "currency": "EUR"}
    assert inst.snapshot()["machine_version"] == "3"
    assert old["machine_version"] == "1"  # the input is not touched


def test_missing_migration_is_a_migration_error() -> None:
    old = machine(version="1").start().snapshot()
    with pytest.raises(MigrationError) as info:
        machine(version="2").restore(old)
    assert info.value.found_version == "1" and info.value.expected_version == "2"
    assert "migrations={'1': fn}" in str(info.value)


def test_bad_migration_results_are_migration_errors() -> None:
    old = machine(version="1").start().snapshot()
    stuck = machine(version="2", migrations={"1": lambda s: s})
    with pytest.raises(MigrationError, match="new machine_version"):
        stuck.restore(old)
    broken = machine(
        version="2", migrations={"1": lambda s: {**s, "machine_version": "2", "value": "gone"}}
    )
    with pytest.raises(MigrationError, match="invalid snapshot"):
        broken.restore(old)
    looping = machine(
        version="3",
        migrations={
            "1": lambda s: {**s, "machine_version": "2"},
            "2": lambda s: {**s, "machine_version": "1"},
        },
    )
    with pytest.raises(MigrationError):
        looping.restore(old)


def test_version_argument_wins_over_config() -> None:
    config = {**ORDER, "version": "7"}
    assert create_machine(config, logic=ORDER_LOGIC).version == "7"
    assert create_machine(config, logic=ORDER_LOGIC, version="8").version == "8"
    assert create_machine(ORDER, logic=ORDER_LOGIC).version == ""
