"""``PERMISSIONS`` with object-level checks: loading (bad paths are load
problems, xsm.E007), ``may_send`` (the one rule) and ``events(user=)`` on a
model row, on SQLite and PostgreSQL, fakeredis and live."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.core import checks

from django_xsm.fields.events import may_send
from django_xsm.registry import VIEW, machines
from tests.django.fields.conftest import DB_ALIASES
from tests.fieldapp import permissions
from tests.fieldapp.models import Order

SMALL = "tests.fieldapp.permissions.small_orders"


@pytest.fixture(autouse=True)
def _calls() -> None:
    permissions.CALLS.clear()


def shop_rules(xsm: Any, rules: Any) -> None:
    """The shop machine with ``PERMISSIONS = rules``."""
    shop = {**settings.XSM["MACHINES"]["shop"], "PERMISSIONS": rules}
    xsm(MACHINES={**settings.XSM["MACHINES"], "shop": shop})


def user(name: str, *codenames: str) -> User:
    made = User.objects.create_user(name)
    for codename in codenames:
        made.user_permissions.add(Permission.objects.get(codename=codename))
    return User.objects.get(pk=made.pk)  # no cached permissions


# --- loading -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ("tests.fieldapp.permissions.missing", "cannot import the PERMISSIONS['REFUND'] check"),
        ("tests.nowhere.module.check", "cannot import the PERMISSIONS['REFUND'] check"),
        ("tests.fieldapp.permissions.NOT_CALLABLE", "is a int, not a callable"),
        ("nodot", "must be a permission or a check"),
        (42, "must be a permission or a check"),
        ([], "is an empty list"),
        (["fieldapp.refund_order", None], "must be a permission or a check"),
    ],
)
def test_a_rule_that_does_not_load_is_a_load_problem(xsm: Any, rule: Any, problem: str) -> None:
    shop_rules(xsm, {"REFUND": rule})
    [found] = [p for p in machines.problems if p.name == "shop"]
    assert problem in found.message
    reported = [m for m in checks.run_checks() if m.id == "xsm.E007"]
    assert any(problem in m.msg for m in reported), reported


def test_rules_load_as_tuples_with_paths_imported(xsm: Any) -> None:
    shop_rules(
        xsm,
        {
            "REFUND": "fieldapp.refund_order",
            "SHIP": ["fieldapp.refund_order", SMALL],
            "PAY": permissions.small_orders,
            VIEW: SMALL,
        },
    )
    assert machines["shop"].permissions == {
        "REFUND": ("fieldapp.refund_order",),
        "SHIP": ("fieldapp.refund_order", permissions.small_orders),
        "PAY": (permissions.small_orders,),
        "xsm.view": (permissions.small_orders,),
    }


# --- may_send ------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_rule_must_grant_and_a_check_gets_user_target_and_event(xsm: Any) -> None:
    shop_rules(xsm, {"REFUND": ["fieldapp.refund_order", SMALL]})
    entry = machines["shop"]
    rita, bob = user("rita", "refund_order"), user("bob")
    small, big = Order(total=5), Order(total=500)
    assert may_send(entry, "REFUND", rita, small)
    assert [("rita", small, "REFUND")] == permissions.CALLS
    assert not may_send(entry, "REFUND", rita, big)
    assert not may_send(entry, "REFUND", bob, small)  # the permission refuses first
    assert len(permissions.CALLS) == 2
    assert may_send(entry, "SHIP", bob, big)  # no rule for SHIP
    assert may_send(entry, "REFUND", None, big)  # no user: no check (code, not a request)


@pytest.mark.django_db
def test_a_superuser_holds_every_permission_but_a_check_still_decides(xsm: Any) -> None:
    """docs/admin.md and security.md: a refusal of the check stands."""
    shop_rules(xsm, {"REFUND": ["fieldapp.refund_order", SMALL]})
    root = User.objects.create_superuser("root")
    assert may_send(machines["shop"], "REFUND", root, Order(total=5))
    assert not may_send(machines["shop"], "REFUND", root, Order(total=500))
    assert [(name, event) for name, _, event in permissions.CALLS] == [("root", "REFUND")] * 2


@pytest.mark.django_db
def test_without_a_target_a_check_refuses_unasked(xsm: Any) -> None:
    shop_rules(xsm, {"REFUND": SMALL})
    assert not may_send(machines["shop"], "REFUND", user("boss"))
    assert permissions.CALLS == []


@pytest.mark.django_db
def test_a_check_that_raises_refuses_with_a_warning_and_no_traceback(
    xsm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    shop_rules(xsm, {"REFUND": "tests.fieldapp.permissions.broken"})
    with caplog.at_level(logging.WARNING, logger="django_xsm.permissions"):
        assert not may_send(machines["shop"], "REFUND", user("boss"), "shop:1")
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "broken" in record.getMessage() and "'shop'" in record.getMessage()
    assert "RuntimeError" in record.getMessage() and "REFUND" in record.getMessage()


@pytest.mark.django_db
def test_viewing_asks_the_view_rules_with_no_event_type(xsm: Any) -> None:
    shop_rules(xsm, {VIEW: SMALL, "REFUND": "fieldapp.refund_order"})
    bob = user("bob")
    assert may_send(machines["shop"], None, bob, "shop:1")
    assert not may_send(machines["shop"], None, bob, "shop:1-locked")
    assert permissions.CALLS == [("bob", "shop:1", None), ("bob", "shop:1-locked", None)]


# --- events(user=) on a row ---------------------------------------------------------------


@pytest.mark.django_db(databases=DB_ALIASES)
def test_events_lists_what_the_check_grants_for_each_row(
    backend: Any, alias: str, xsm: Any
) -> None:
    shop_rules(xsm, {"REFUND": SMALL})
    small = Order.objects.using(alias).create(total=5)
    big = Order.objects.using(alias).create(total=500)
    for row in (small, big):
        row.status.send("PAY_ANYWAY")
    bob, boss = user("bob"), user("boss")
    assert small.status.events(user=bob) == ["SHIP", "REFUND"]
    assert big.status.events(user=bob) == ["SHIP"]
    assert big.status.events(user=boss) == ["SHIP", "REFUND"]
    assert big.status.events() == ["SHIP", "REFUND"]  # no user: no check
    assert ("bob", big, "REFUND") in permissions.CALLS
