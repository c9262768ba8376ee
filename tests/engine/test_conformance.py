"""SCION conformance: 71 structure-only SCXML cases converted to XState v5
JSON and checked against xstate 5.33.3 (see conformance/README.md).

The vendored copy in ``conformance/`` is what runs; when the shared copy
(``../shared/conformance/scion.json``) is present it must be identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from django_xsm.engine import Instance, create_machine

HERE = Path(__file__).parent / "conformance"
VENDORED = HERE / "scion.json"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "scion.json"

CASES: list[dict[str, Any]] = json.loads(VENDORED.read_text(encoding="utf-8"))


def leaf_ids(instance: Instance) -> list[str]:
    """Ids of the active atomic and final states, sorted (the README's rule)."""
    machine = instance.machine
    return sorted(
        sid for sid in instance.state_ids if machine.get_state(sid).type in ("atomic", "final")
    )


def test_vendored_copy_has_all_cases_and_licence() -> None:
    assert len(CASES) == 71
    assert sum(len(c["steps"]) for c in CASES) == 109
    assert "Apache License" in (HERE / "LICENSE").read_text(encoding="utf-8")
    assert "SCION" in (HERE / "NOTICE").read_text(encoding="utf-8")


@pytest.mark.skipif(not SHARED.exists(), reason="no shared conformance checkout next to the repo")
def test_vendored_copy_equals_shared_copy() -> None:
    assert json.loads(SHARED.read_text(encoding="utf-8")) == CASES


@pytest.mark.parametrize("case", CASES, ids=[c["name"].removeprefix("test/") for c in CASES])
def test_scion_case(case: dict[str, Any]) -> None:
    machine = create_machine(case["machine"])
    instance = machine.start()
    assert leaf_ids(instance) == sorted(case["initial"])
    for number, step in enumerate(case["steps"], 1):
        instance.send({"type": step["event"]})
        assert leaf_ids(instance) == sorted(step["expect"]), f"step {number}: {step['event']}"


@pytest.mark.parametrize("case", CASES, ids=[c["name"].removeprefix("test/") for c in CASES])
def test_scion_case_through_the_pure_transition(case: dict[str, Any]) -> None:
    """The pure API reaches the same configurations (snapshots round-trip)."""
    machine = create_machine(case["machine"])
    snapshot = machine.initial_snapshot(now=0).snapshot
    for step in case["steps"]:
        snapshot = machine.transition(snapshot, step["event"], now=0).snapshot
        snapshot = json.loads(json.dumps(snapshot))
        assert leaf_ids(machine.restore(snapshot)) == sorted(step["expect"])
