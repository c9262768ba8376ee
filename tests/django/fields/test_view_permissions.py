"""``@stateful_view`` asks the machine's ``PERMISSIONS`` about each send,
as the admin and DRF do: ``may_send(entry, event, request.user, target)``
with the row of a model-bound view, the instance key of a key-based one. A
refused send is a 403 ``forbidden`` problem that writes nothing (no version,
no transition record, the idempotency key released); on SQLite and
PostgreSQL, fakeredis and live, sync and async views."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User

from django_xsm.registry import machines
from tests.django.conftest import key_header, problem
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp import permissions
from tests.fieldapp.models import Order

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.fields.urls"),
]

SMALL = "tests.fieldapp.permissions.small_orders"
FORBIDDEN = "http://testserver/_xsm/problems/forbidden"
BODY_VIEWS = ["send_body", "asend_body"]
KEY_VIEWS = ["send_key", "asend_key"]


@pytest.fixture(autouse=True)
def _calls() -> None:
    permissions.CALLS.clear()


def shop_rules(xsm: Any, rules: Any) -> None:
    """The shop machine with ``PERMISSIONS = rules`` (None: no PERMISSIONS)."""
    shop = {k: v for k, v in settings.XSM["MACHINES"]["shop"].items() if k != "PERMISSIONS"}
    if rules is not None:
        shop["PERMISSIONS"] = rules
    xsm(MACHINES={**settings.XSM["MACHINES"], "shop": shop})


def user(name: str, *codenames: str) -> User:
    made = User.objects.create_user(name)
    for codename in codenames:
        made.user_permissions.add(Permission.objects.get(codename=codename))
    return User.objects.get(pk=made.pk)


def post(client: Any, path: str, body: dict[str, Any], key: str) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", **key_header(key))


def big_order_with_items() -> Order:
    """An order the check refuses to anyone but "boss" (total 500), whose
    instance exists at version 1 (one ADD)."""
    row = Order.objects.create(total=500)
    row.status.send("ADD")
    return row


def assert_untouched(row: Order, alias: str) -> None:
    assert row_in_db(Order, row.pk, alias) == ("cart", 1)
    assert [r.event_type for r in row.status.history()] == ["ADD"]
    assert machines["shop"].objects.get(row.status.key).version == 1


@pytest.mark.parametrize("view", BODY_VIEWS)
def test_the_check_refuses_another_users_send_and_nothing_is_written(
    client: Any, backend: Any, routed: str, xsm: Any, view: str
) -> None:
    shop_rules(xsm, {"PAY_ANYWAY": SMALL})
    row = big_order_with_items()
    client.force_login(user("alice"))
    refused = post(client, f"/orders/{row.pk}/{view}", {"type": "PAY_ANYWAY"}, "k1")
    assert refused.status_code == 403, refused.content
    body = problem(refused)
    assert body["type"] == FORBIDDEN
    assert body["event"] == "PAY_ANYWAY"
    assert body["detail"] == "You may not send PAY_ANYWAY to this order"
    assert_untouched(row, routed)
    # asked once, about the row, for alice
    [(username, target, event_type)] = permissions.CALLS
    assert (username, event_type) == ("alice", "PAY_ANYWAY")
    assert isinstance(target, Order) and target.pk == row.pk
    # the claim was released: the same key runs again once the rule grants it
    Order.objects.filter(pk=row.pk).update(total=5)
    allowed = post(client, f"/orders/{row.pk}/{view}", {"type": "PAY_ANYWAY"}, "k1")
    assert allowed.status_code == 200, allowed.content
    assert "Idempotent-Replayed" not in allowed
    assert row_in_db(Order, row.pk, routed) == ("paid", 2)


@pytest.mark.parametrize("view", BODY_VIEWS)
def test_a_user_the_check_grants_sends(
    client: Any, backend: Any, routed: str, xsm: Any, view: str
) -> None:
    shop_rules(xsm, {"PAY_ANYWAY": SMALL})
    row = big_order_with_items()
    client.force_login(user("boss"))
    allowed = post(client, f"/orders/{row.pk}/{view}", {"type": "PAY_ANYWAY"}, "k1")
    assert allowed.status_code == 200, allowed.content
    assert allowed.json() == {"order": row.pk, "state": "paid"}
    assert row_in_db(Order, row.pk, routed) == ("paid", 2)
    [record] = row.status.history()[1:]
    assert (record.event_type, record.actor) == ("PAY_ANYWAY", "boss")


@pytest.mark.parametrize("view", BODY_VIEWS)
def test_an_anonymous_request_is_refused_a_guarded_event_only(
    client: Any, backend: Any, routed: str, xsm: Any, view: str
) -> None:
    shop_rules(xsm, {"PAY_ANYWAY": SMALL})
    row = big_order_with_items()
    refused = post(client, f"/orders/{row.pk}/{view}", {"type": "PAY_ANYWAY"}, "k1")
    assert refused.status_code == 403
    assert problem(refused)["type"] == FORBIDDEN
    assert [c[0] for c in permissions.CALLS] == [""]  # AnonymousUser, asked like anyone
    assert_untouched(row, routed)
    unguarded = post(client, f"/orders/{row.pk}/{view}", {"type": "ADD"}, "k2")
    assert unguarded.status_code == 200
    assert row_in_db(Order, row.pk, routed) == ("cart", 2)


@pytest.mark.parametrize("view", BODY_VIEWS)
def test_a_django_permission_rule(client: Any, backend: Any, routed: str, view: str) -> None:
    """The test settings' own rule: REFUND needs fieldapp.refund_order."""
    row = Order.objects.create()
    row.status.send("PAY_ANYWAY")
    client.force_login(user("alice"))
    refused = post(client, f"/orders/{row.pk}/{view}", {"type": "REFUND"}, "k1")
    assert refused.status_code == 403 and problem(refused)["type"] == FORBIDDEN
    assert row_in_db(Order, row.pk, routed) == ("paid", 1)
    client.force_login(user("refunder", "refund_order"))
    allowed = post(client, f"/orders/{row.pk}/{view}", {"type": "REFUND"}, "k1")
    assert allowed.status_code == 200, allowed.content
    assert row_in_db(Order, row.pk, routed) == ("refunded", 2)


@pytest.mark.parametrize("view", KEY_VIEWS)
def test_a_key_based_view_asks_the_check_about_the_key(
    client: Any, backend: Any, xsm: Any, view: str
) -> None:
    shop_rules(xsm, {"PAY_ANYWAY": SMALL})
    client.force_login(user("alice"))
    refused = post(client, f"/shop/a-locked/{view}", {"type": "PAY_ANYWAY"}, "k1")
    assert refused.status_code == 403, refused.content
    body = problem(refused)
    assert (body["type"], body["event"]) == (FORBIDDEN, "PAY_ANYWAY")
    assert body["detail"] == "You may not send PAY_ANYWAY to this instance"
    assert not machines["shop"].objects.exists("shop:a-locked")  # not even created
    allowed = post(client, f"/shop/a/{view}", {"type": "PAY_ANYWAY"}, "k2")
    assert allowed.status_code == 200, allowed.content
    assert allowed.json() == {"key": "shop:a", "state": "paid"}
    assert permissions.CALLS == [
        ("alice", "shop:a-locked", "PAY_ANYWAY"),
        ("alice", "shop:a", "PAY_ANYWAY"),
    ]


@pytest.mark.parametrize("rules", [None, {}], ids=["no-permissions", "empty"])
@pytest.mark.parametrize("view", BODY_VIEWS)
def test_a_machine_without_permissions_is_unchanged(
    client: Any, backend: Any, routed: str, xsm: Any, view: str, rules: Any
) -> None:
    shop_rules(xsm, rules)
    row = big_order_with_items()
    response = post(client, f"/orders/{row.pk}/{view}", {"type": "REFUND"}, "k1")
    assert response.status_code == 409  # anonymous, and only the chart says no
    response = post(client, f"/orders/{row.pk}/{view}", {"type": "PAY_ANYWAY"}, "k2")
    assert response.status_code == 200, response.content
    assert row_in_db(Order, row.pk, routed) == ("paid", 2)
    assert permissions.CALLS == []


def test_a_request_without_a_user_is_refused_a_guarded_event(
    client: Any, backend: Any, routed: str, xsm: Any
) -> None:
    """No AuthenticationMiddleware: no user the rules could grant."""
    settings.MIDDLEWARE = ["django_xsm.middleware.XsmMiddleware"]
    shop_rules(xsm, {"PAY_ANYWAY": SMALL})
    row = big_order_with_items()
    refused = post(client, f"/orders/{row.pk}/send_body", {"type": "PAY_ANYWAY"}, "k1")
    assert refused.status_code == 403 and problem(refused)["type"] == FORBIDDEN
    assert permissions.CALLS == []
    assert_untouched(row, routed)


@pytest.mark.parametrize("view", BODY_VIEWS)
def test_a_check_that_raises_is_a_403(
    client: Any,
    backend: Any,
    routed: str,
    xsm: Any,
    view: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    shop_rules(xsm, {"PAY_ANYWAY": "tests.fieldapp.permissions.broken"})
    row = big_order_with_items()
    client.force_login(user("boss"))
    with caplog.at_level(logging.WARNING, logger="django_xsm.permissions"):
        refused = post(client, f"/orders/{row.pk}/{view}", {"type": "PAY_ANYWAY"}, "k1")
    assert refused.status_code == 403
    assert "secret" not in problem(refused)["detail"]
    assert any(r.name == "django_xsm.permissions" for r in caplog.records)
    assert_untouched(row, routed)
