"""The worked example of "Changing a chart" (docs/models.md) runs as written:
instances stored by version 1 load under version 2, the armed timer of a
renamed state fires through the migrated deadline, and ``check --deploy``
reports the chart deployed without the version bump (``xsm.E015``). On
fakeredis and, with ``XSM_REDIS_URL``, the live server."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from django_xsm import backend as stores
from django_xsm import operations
from django_xsm.checks import check_deploy
from django_xsm.engine import Machine, create_machine
from django_xsm.registry import machines

# the demo's Order rows project the "order" machine: commits may touch the database
pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"
DAY_MS = 86_400_000


def example() -> types.ModuleType:
    """The section's first Python block, as the module ``shop.machines``
    it says it is (run under another name here)."""
    section = DOC.read_text(encoding="utf-8").split("## Changing a chart", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "no Python block in 'Changing a chart'"
    module = types.ModuleType("changing_a_chart")
    exec(compile(code.group(1), f"{DOC}#changing-a-chart", "exec"), module.__dict__)
    return module


@pytest.fixture
def shop(xsm: Any, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The example's module, registered as ``order`` with version 1 live
    (requested before ``backend``, which builds on these settings)."""
    module = example()
    module.live = create_machine(module.ORDER_V1)
    monkeypatch.setitem(sys.modules, "changing_a_chart", module)
    xsm(MACHINES={"order": "changing_a_chart.live"}, OUTBOX={"HANDLERS": {}})
    return module


def deploy(shop: types.ModuleType, chart: Machine) -> None:
    """The new code: ``chart`` runs as ``order`` on the same store."""
    shop.live = chart
    machines.reset()


def create(key: str, *events: str, ms_ago: int = 0) -> None:
    """Store ``key`` with the live chart, its clock ``ms_ago`` behind."""
    store = stores.get_store()
    real = store.clock
    store.clock = lambda: real() - ms_ago
    try:
        with machines["order"].objects.open(key, actor="test") as block:
            for event in events:
                block.send(event)
    finally:
        store.clock = real


def e015() -> list[Any]:
    return [m for m in check_deploy() if m.id == "xsm.E015"]


def test_the_worked_example_migrates_stored_instances_and_their_timers(
    shop: types.ModuleType, backend: Any
) -> None:
    # version 1 is live: an order paid over a day ago (its timer is due)
    # and one at the checkout
    create("order:1", "CHECKOUT", "PAY", ms_ago=DAY_MS + 5_000)
    create("order:2", "CHECKOUT")
    before = machines["order"].objects.get("order:1")
    assert (before.value, before.machine_version) == ("paid", "1")
    assert [d.event_type for d in before.deadlines] == ["xstate.after.86400000.order.paid"]

    # the mistake: version 2's chart without the bump
    deploy(shop, create_machine({**shop.ORDER_V2, "version": "1"}))
    [error] = e015()
    assert "Machine 'order' (version '1'): 2 of the 2 stored instance(s)" in error.msg

    # the example: version 2 with its migration
    deploy(shop, shop.order)
    assert e015() == []
    view = machines["order"].objects.get("order:1")  # migrated in memory, nothing written
    assert (view.value, view.machine_version, view.version) == ("settled", "1", before.version)
    assert [d.event_type for d in view.deadlines] == ["xstate.after.86400000.order.settled"]
    result = operations.scan_timers()  # the armed timer fires, once, through the migration
    assert (result.fired, result.errors) == (1, 0)
    after = machines["order"].objects.get("order:1")
    assert (after.value, after.machine_version) == ("archived", "2")
    assert operations.scan_timers().fired == 0
    with machines["order"].objects.open("order:2", actor="test") as block:
        block.send("PAY")  # the renamed state is reachable from an old checkout
    assert machines["order"].objects.get("order:2").value == "settled"
    assert e015() == []


def test_the_worked_example_takes_instances_created_while_the_bump_was_missing(
    shop: types.ModuleType, backend: Any
) -> None:
    deploy(shop, create_machine({**shop.ORDER_V2, "version": "1"}))  # deployed unbumped
    create("order:3", "CHECKOUT", "PAY")  # version "1", already the new structure
    deploy(shop, shop.order)
    assert machines["order"].objects.get("order:3").value == "settled"
    with machines["order"].objects.open("order:3", actor="test") as block:
        block.send("SHIP")
    assert machines["order"].objects.get("order:3").value == "shipped"
