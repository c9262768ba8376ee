"""The machine registry and the ORM-style manager."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured, ObjectDoesNotExist

from django_xsm.engine import Machine
from django_xsm.exceptions import InstanceNotFoundError, UnknownMachineError
from django_xsm.persistence import PessimisticLock
from django_xsm.registry import InstanceDoesNotExist, InstanceView, machines
from tests.django import machines as test_machines

# --- loading ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "machine_id"),
    [
        ("tests.django.machines.ticket", "ticket"),
        ("tests.django.machines.ticket_factory", "ticket"),
        ("tests.django.machines.PLAIN_CONFIG", "plain"),
        ("data/plain.json", "plain"),
        ({"CONFIG": "data/ticket.json", "LOGIC": "tests.django.machines.logic"}, "ticket"),
        ({"CONFIG": "data/ticket.json", "LOGIC": "tests.django.machines.logic_factory"}, "ticket"),
        (
            {"CONFIG": "tests.django.machines.TICKET", "LOGIC": "tests.django.machines.logic"},
            "ticket",
        ),
    ],
)
def test_machine_specs(xsm: Any, spec: Any, machine_id: str):
    xsm(MACHINES={"m": spec})
    assert machines.problems == []
    entry = machines["m"]
    assert isinstance(entry.machine, Machine)
    assert entry.machine.id == machine_id
    assert entry.name == "m"


def test_absolute_json_path(xsm: Any, settings: Any):
    path = str(settings.BASE_DIR / "data" / "plain.json")
    xsm(MACHINES={"p": path})
    assert machines["p"].machine.id == "plain"
    assert machines["p"].source == path


def test_version_applies_to_configs(xsm: Any):
    xsm(MACHINES={"p": {"CONFIG": "data/plain.json", "VERSION": "7"}})
    assert machines["p"].machine.version == "7"


def test_relative_json_needs_base_dir(xsm: Any, settings: Any):
    del settings.BASE_DIR
    xsm(MACHINES={"p": "data/plain.json"})
    [problem] = machines.problems
    assert "BASE_DIR" in problem.message


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("tests.django.nope.machine", "cannot import machine 'tests.django.nope.machine'"),
        ("tests.django.machines.NOT_A_MACHINE", "is a int, not a Machine"),
        ("data/missing.json", "does not exist"),
        ("data/broken.json", "not valid JSON (line 1"),
        ("tests.django.machines.TICKET", "bump"),  # actions named but no logic
        ({"CONFIG": "data/plain.json", "LOGC": "x"}, "unknown key 'LOGC'"),
        ({"LOGIC": "tests.django.machines.logic"}, "'CONFIG' is required"),
        (
            {"CONFIG": "data/plain.json", "LOGIC": "tests.django.machines.PLAIN_CONFIG"},
            "not a MachineLogic",
        ),
        ({"CONFIG": "tests.django.machines.ticket", "VERSION": "2"}, "already a compiled Machine"),
        ({"CONFIG": "data/plain.json", "VERSION": 2}, "VERSION must be a string"),
        (42, "expected a dotted path"),
    ],
)
def test_load_problems(xsm: Any, spec: Any, fragment: str):
    xsm(MACHINES={"bad": spec, "ticket": "tests.django.machines.ticket"})
    [problem] = machines.problems
    assert problem.name == "bad"
    assert fragment in str(problem)
    assert machines["ticket"].machine.id == "ticket"  # the others still load
    with pytest.raises(ImproperlyConfigured, match="XSM\\['MACHINES'\\]\\['bad'\\]"):
        machines["bad"]


@pytest.mark.parametrize(
    ("source", "spec", "fragment"),
    [
        ("machine = undefined\n", "chart_raises.machine", "raised NameError: name 'undefined'"),
        ("def machine(:\n", "chart_raises.machine", "raised SyntaxError"),
        ("raise RuntimeError('x' * 10_000)\n", "chart_raises.machine", "raised RuntimeError: xxx"),
        (
            "def machine():\n    raise ValueError('no chart today')\n",
            "chart_raises.machine",
            "calling the machine factory 'chart_raises.machine' raised ValueError: no chart today",
        ),
    ],
)
def test_a_machine_module_that_raises_is_a_bounded_load_problem(
    xsm: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, source: str, spec: str, fragment: str
):
    """Start-up goes on: the error is kept (xsm.E007, and E101 for the
    fields using it), its message bounded, as ImportError's already was."""
    (tmp_path / "chart_raises.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "chart_raises", raising=False)
    xsm(MACHINES={"bad": spec, "ticket": "tests.django.machines.ticket"})
    [problem] = machines.problems
    assert problem.name == "bad" and fragment in problem.message
    assert len(problem.message) < 450
    assert machines["ticket"].machine.id == "ticket"
    apps.get_app_config("django_xsm").ready()  # no exception
    with pytest.raises(ImproperlyConfigured, match="XSM\\['MACHINES'\\]\\['bad'\\]"):
        machines["bad"]


def test_invalid_chart_names_the_json_path(xsm: Any):
    xsm(MACHINES={"bad": {"CONFIG": "tests.django.machines.PLAIN_CONFIG"}})
    assert machines.problems == []
    broken = {"id": "x", "initial": "a", "states": {"a": {"on": {"GO": "nowhere"}}}}
    test_machines.BROKEN = broken  # type: ignore[attr-defined]
    try:
        xsm(MACHINES={"bad": "tests.django.machines.BROKEN"})
        [problem] = machines.problems
        assert "states.a.on.GO" in problem.message
    finally:
        del test_machines.BROKEN  # type: ignore[attr-defined]


def test_duplicate_machine_ids_are_refused(xsm: Any):
    xsm(
        MACHINES={
            "ticket": "tests.django.machines.ticket",
            "other": "tests.django.machines.OTHER_WITH_SAME_ID",
        }
    )
    [problem] = machines.problems
    assert problem.name == "other"
    assert "already used by 'ticket'" in problem.message


def test_the_same_machine_under_two_names_is_an_alias(xsm: Any):
    xsm(MACHINES={"ticket": "tests.django.machines.ticket", "t": "tests.django.machines.ticket"})
    assert machines.problems == []
    assert machines["t"].machine is machines["ticket"].machine
    assert machines.name_for_machine_id("ticket") == "ticket"


def test_bad_names(xsm: Any):
    xsm(MACHINES={"has space": "tests.django.machines.ticket"})
    [problem] = machines.problems
    assert "machine names" in problem.message


TWO_MACHINES = {
    "ticket": "tests.django.machines.ticket",
    "order": "testproject.orders.machines.order",
}


def test_unknown_name(xsm: Any):
    xsm(MACHINES=TWO_MACHINES)
    with pytest.raises(UnknownMachineError, match="Unknown machine 'nope'") as info:
        machines["nope"]
    assert set(info.value.known) == {"ticket", "order"}
    assert machines.get("nope") is None
    assert "nope" not in machines


def test_machines_compile_once(xsm: Any):
    test_machines.FACTORY_CALLS[0] = 0
    xsm(MACHINES={"c": "tests.django.machines.counting_factory"})
    apps.get_app_config("django_xsm").ready()  # what start-up does
    assert test_machines.FACTORY_CALLS[0] == 1
    for _ in range(3):
        assert machines["c"].machine is machines["c"].machine
    machines.load()
    assert test_machines.FACTORY_CALLS[0] == 1
    xsm(MACHINES={"c": "tests.django.machines.counting_factory", "p": "data/plain.json"})
    machines["c"]
    assert test_machines.FACTORY_CALLS[0] == 2  # settings changed: reloaded once


def test_registry_listing(xsm: Any):
    xsm(MACHINES=TWO_MACHINES)
    assert machines.names() == ["ticket", "order"]
    assert list(machines) == ["ticket", "order"]
    assert len(machines) == 2
    assert [e.name for e in machines.values()] == ["ticket", "order"]
    assert dict(machines.items())["order"].machine.id == "order"
    assert set(machines.by_machine_id()) == {"ticket", "order"}


def test_ready_survives_invalid_settings(xsm: Any):
    xsm(NOPE=1)
    apps.get_app_config("django_xsm").ready()  # no exception: xsm.E001 reports it


# --- manager ------------------------------------------------------------------------------


def test_get_returns_a_read_only_view(backend: Any):
    objects = machines["ticket"].objects
    with objects.open("ticket:1", actor="alice") as block:
        block.send("BUMP")
        block.send("BUMP")
    view = objects.get("ticket:1")
    assert isinstance(view, InstanceView)
    assert view.machine == "ticket"
    assert view.key == "ticket:1"
    assert view.value == "open"
    assert view.state_ids == ("ticket", "ticket.open")
    assert view.context == {"count": 2}
    assert view.status == "active"
    assert view.version == 1
    assert view.updated_at.tzinfo is not None
    assert abs(view.updated_at - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)
    assert view.matches("open") and view.matches("ticket.open")
    assert view.can("CLOSE")
    assert len(view.deadlines) == 1
    view.context["count"] = 99  # a private copy
    assert objects.get("ticket:1").context == {"count": 2}
    data = view.to_dict()
    assert data["deadlines"][0]["state"] == "ticket.open"
    assert data["updated_at"].endswith("+00:00")


def test_a_manager_never_erases_or_reads_another_machines_instance(backend: Any):
    with machines["ticket"].objects.open("shared:1", actor="alice") as block:
        block.send("BUMP")
    orders = machines["order"].objects
    for call in (orders.forget, orders.history, orders.latest, orders.get):
        with pytest.raises(orders.DoesNotExist):
            call("shared:1")
    # still there, log included, for its own machine
    assert machines["ticket"].objects.get("shared:1").version == 1
    assert [r.event_type for r in machines["ticket"].objects.history("shared:1")] == ["BUMP"]
    assert machines["ticket"].objects.forget("shared:1")["snapshot"] == 1


def test_does_not_exist(backend: Any):
    objects = machines["ticket"].objects
    for error in (
        objects.DoesNotExist,
        machines["ticket"].DoesNotExist,
        InstanceDoesNotExist,
        ObjectDoesNotExist,
        InstanceNotFoundError,
        LookupError,
    ):
        with pytest.raises(error):
            objects.get("ticket:absent")
    assert objects.exists("ticket:absent") is False


def test_a_key_of_another_machine_does_not_exist_here(backend: Any):
    machines["ticket"].objects.send("shared:1", "BUMP", create=True)
    assert machines["ticket"].objects.exists("shared:1")
    assert machines["order"].objects.exists("shared:1") is False
    with pytest.raises(machines["order"].DoesNotExist):
        machines["order"].objects.get("shared:1")


def test_open_uses_the_settings_plugins(backend: Any):
    objects = machines["ticket"].objects
    with objects.open("ticket:2", actor="bob", correlation_id="c-1") as block:
        block.send("BUMP", reason="because")
    [record] = objects.history("ticket:2")
    assert (record.actor, record.reason, record.correlation_id) == ("bob", "because", "c-1")
    assert record.version == 1


def test_open_with_idempotency_key_dedupes(backend: Any):
    objects = machines["ticket"].objects
    with objects.open("ticket:3", idempotency_key="k", principal="acct") as block:
        block.send("BUMP")
        block.set_result({"done": True})
    with objects.open("ticket:3", idempotency_key="k", principal="acct") as block:
        assert block.duplicate is True
        assert block.replayed_result == {"done": True}
        block.send("BUMP")  # replayed, nothing runs
    assert objects.get("ticket:3").context["count"] == 1


def test_open_create_false(backend: Any):
    with pytest.raises(machines["ticket"].DoesNotExist):
        with machines["ticket"].objects.open("ticket:none", create=False):
            pass


def test_open_with_a_pessimistic_lock(backend: Any):
    objects = machines["ticket"].objects
    with objects.open("ticket:4", lock="pessimistic") as block:
        block.send("BUMP")
    with objects.open("ticket:4", lock=PessimisticLock(0.5)) as block:
        block.send("BUMP")
    assert objects.get("ticket:4").version == 2


def test_send_shortcut(backend: Any):
    objects = machines["ticket"].objects
    receipt = objects.send("ticket:5", "BUMP", create=True, actor="carol")
    assert receipt.accepted
    again = objects.send("ticket:5", {"type": "BUMP"}, idempotency_key="e1")
    assert again.accepted
    dup = objects.send("ticket:5", "BUMP", idempotency_key="e1")
    assert dup.duplicate is True
    refused = objects.send("ticket:5", "REOPEN")  # not strict: ignored
    assert refused.accepted is False
    assert objects.get("ticket:5").context["count"] == 2
    with pytest.raises(objects.DoesNotExist):
        objects.send("ticket:none", "BUMP")


def test_forget(backend: Any):
    objects = machines["ticket"].objects
    objects.send("ticket:6", "BUMP", create=True)
    assert objects.forget("ticket:6") == {"snapshot": 1, "deadlines": 1, "lock": 0, "log": 1}
    assert objects.exists("ticket:6") is False
    assert objects.history("ticket:6") == []


def test_keys_by_prefix_literally_and_per_machine(backend: Any):
    ticket, order = machines["ticket"].objects, machines["order"].objects
    for key in ("t:a*1", "t:ab", "t:b", "u:x"):
        ticket.send(key, "BUMP", create=True)
    with order.open("t:order") as block:
        block.send("ADD_ITEM", sku="s", qty=1, price_cents=1)
    assert list(ticket.keys("t:")) == ["t:a*1", "t:ab", "t:b"]
    assert list(ticket.keys("t:a*")) == ["t:a*1"]  # '*' is literal
    assert list(order.keys("t:")) == ["t:order"]
    page, cursor = ticket.page("t:", limit=2)
    assert page == ["t:a*1", "t:ab"]
    rest, end = ticket.page("t:", after=cursor, limit=2)
    assert rest == ["t:b"] and end == ""
    ticket.send("t:b", "CLOSE")
    assert ticket.page("t:", state="ticket.closed") == (["t:b"], "")


def test_history_and_latest(backend: Any):
    objects = machines["ticket"].objects
    for _ in range(3):
        objects.send("ticket:7", "BUMP", create=True)
    assert [r.seq for r in objects.history("ticket:7")] == [1, 2, 3]
    assert [r.seq for r in objects.history("ticket:7", after_seq=1, limit=1)] == [2]
    assert [r.seq for r in objects.latest("ticket:7", 2)] == [2, 3]


def test_async_manager(backend: Any):
    objects = machines["ticket"].objects

    async def run() -> tuple[Any, bool, bool]:
        async with objects.aopen("ticket:8", actor="async") as block:
            block.send("BUMP")
        view = await objects.aget("ticket:8")
        return view, await objects.aexists("ticket:8"), await objects.aexists("ticket:none")

    view, yes, no = asyncio.run(run())
    assert view.context["count"] == 1
    assert (yes, no) == (True, False)
    assert objects.history("ticket:8")[0].actor == "async"


def test_async_open_create_false(backend: Any):
    async def run() -> None:
        async with machines["ticket"].objects.aopen("ticket:none", create=False):
            pass

    with pytest.raises(machines["ticket"].DoesNotExist):
        asyncio.run(run())


@pytest.mark.parametrize(
    ("permissions", "problem"),
    [
        ({"NOPE": "orders.x"}, "names event 'NOPE'"),
        ({"BUMP": "no_dot"}, "must be a permission or a check"),
        ("orders.x", "PERMISSIONS must be a dict"),
    ],
)
def test_bad_permissions_are_a_load_problem(xsm: Any, permissions: Any, problem: str):
    xsm(MACHINES={"ticket": {"CONFIG": "tests.django.machines.ticket", "PERMISSIONS": permissions}})
    [found] = machines.problems
    assert problem in found.message


def test_permissions_map_events_to_django_permissions(xsm: Any):
    xsm(MACHINES={"ticket": {"CONFIG": "tests.django.machines.ticket",
                             "PERMISSIONS": {"BUMP": "orders.bump_ticket"}}})  # fmt: skip
    assert machines["ticket"].permissions == {"BUMP": ("orders.bump_ticket",)}
