"""Object-level checks in ``PERMISSIONS`` through DRF: the events endpoint
and the events a ``with_events`` field lists ask the check about the row,
on SQLite and PostgreSQL, fakeredis and live."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.conf import settings

from tests.django.drf import views
from tests.django.drf.conftest import DB_ALIASES
from tests.django.drf.test_events import order, problem, send
from tests.django.fields.test_field import row_in_db
from tests.fieldapp import permissions
from tests.fieldapp.models import Order

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]

SMALL = "tests.fieldapp.permissions.small_orders"


@pytest.fixture(autouse=True)
def _calls() -> None:
    permissions.CALLS.clear()


def shop_rules(xsm: Any, rules: Any) -> None:
    shop = {**settings.XSM["MACHINES"]["shop"], "PERMISSIONS": rules}
    xsm(MACHINES={**settings.XSM["MACHINES"], "shop": shop})


def paid(alias: str, total: int) -> Order:
    row = order(alias, total=total)
    row.status.send("PAY_ANYWAY")
    return row


def test_the_endpoint_and_the_listing_ask_the_check_about_the_row(
    api: Any, backend: Any, alias: str, alice: Any, xsm: Any
) -> None:
    shop_rules(xsm, {"REFUND": SMALL})
    small, big = paid(alias, 5), paid(alias, 500)
    api.force_authenticate(alice)
    listed = {
        row.pk: api.get(f"/api/orders/{row.pk}/").json()["status_events"]["events"]
        for row in (small, big)
    }
    assert listed[small.pk] == [
        {"type": "SHIP", "conditional": False},
        {"type": "REFUND", "conditional": False},
    ]
    assert listed[big.pk] == [{"type": "SHIP", "conditional": False}]
    refused = send(api, big.pk, {"type": "REFUND"}, key="r1")
    assert refused.status_code == 403
    assert problem(refused, "forbidden")["event"] == "REFUND"
    assert views.CALLS["perform_event"] == 0
    assert row_in_db(Order, big.pk, alias) == ("paid", 1)
    checked = [c for c in permissions.CALLS if c[1].pk == big.pk]
    assert checked and all(c[0] == "alice" and c[2] == "REFUND" for c in checked)
    assert all(isinstance(c[1], Order) for c in permissions.CALLS)
    allowed = send(api, small.pk, {"type": "REFUND"}, key="r2")
    assert allowed.status_code == 200
    assert allowed.json()["state"] == "refunded"


def test_the_answer_lists_the_next_events_the_check_grants(
    api: Any, backend: Any, alias: str, alice: Any, xsm: Any
) -> None:
    shop_rules(xsm, {"REFUND": SMALL})
    big = order(alias, total=500)
    api.force_authenticate(alice)
    response = send(api, big.pk, {"type": "PAY_ANYWAY"})
    assert response.status_code == 200
    assert response.json()["events"] == [{"type": "SHIP", "conditional": False}]


def test_a_check_that_raises_is_a_403_not_a_500(
    api: Any, backend: Any, alias: str, alice: Any, xsm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    shop_rules(xsm, {"REFUND": "tests.fieldapp.permissions.broken"})
    row = paid(alias, 5)
    api.force_authenticate(alice)
    with caplog.at_level(logging.WARNING, logger="django_xsm.permissions"):
        refused = send(api, row.pk, {"type": "REFUND"})
    assert refused.status_code == 403
    problem(refused, "forbidden")
    [warning] = [r for r in caplog.records if r.name == "django_xsm.permissions"]
    assert warning.exc_info is None and "RuntimeError" in warning.getMessage()
