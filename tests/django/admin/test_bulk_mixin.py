"""Bulk sends of ``StatechartAdminMixin``: a changelist action per field
and event the user may send, a preview of the selected rows, then a
confirmation that sends to each row once (a double submit applies
nothing twice), moves the rows' columns, lists each row's outcome and
records a ``LogEntry`` per changed row. SQLite and PostgreSQL, real
commits; fakeredis and the live server."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client

from django_xsm.admin.bulk import UNAVAILABLE
from tests.django.admin.conftest import post_with_csrf
from tests.django.fields.conftest import DB_ALIASES, alias, routed  # noqa: F401
from tests.fieldapp.models import Order, Shipment

pytestmark = pytest.mark.django_db(databases=DB_ALIASES, transaction=True)

ORDERS = "/shop-admin/fieldapp/order/"
DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


@pytest.fixture
def staff(routed: str) -> Any:  # noqa: F811
    """``staff("name", "change_order", ...)``: a logged-in client
    (``enforce_csrf_checks=True``) for a staff user with fieldapp
    permissions."""

    def build(name: str, *codenames: str, superuser: bool = False) -> Client:
        user = User.objects.create_user(name, password="pw", is_staff=True)
        user.is_superuser = superuser
        user.save()
        for codename in codenames:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="fieldapp", codename=codename)
            )
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        return client

    return build


@pytest.fixture
def root(staff: Any) -> Client:
    client: Client = staff("root", superuser=True)
    return client


def order_in(state: str) -> Order:
    order = Order.objects.create(total=10)
    if state != "cart":
        order.status.send("PAY_ANYWAY", actor="seed")
    if state == "shipped":
        order.status.send("SHIP", actor="seed")
    return Order.objects.get(pk=order.pk)


def actions(client: Client, url: str = ORDERS) -> dict[str, str]:
    html = client.get(url).content.decode()
    if 'name="action"' not in html:  # no action at all: no form
        return {}
    select = html.split('name="action"', 1)[1].split("</select>", 1)[0]
    return dict(re.findall(r'<option value="([^"]+)">([^<]+)</option>', select))


def act(client: Client, action: str, *orders: Any, **extra: Any) -> Any:
    data = {
        "action": action,
        "index": "0",
        "select_across": "0",
        "_selected_action": [str(o.pk) for o in orders],
        **extra,
    }
    return post_with_csrf(client, ORDERS, data)


def confirm(client: Client, preview: Any) -> Any:
    """Post the preview page's confirmation form as it is."""
    html = preview.content.decode()
    form = html.split('id="xsm-bulk-apply"', 1)[1].split("</form>", 1)[0]
    data: dict[str, Any] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form):
        if name != "csrfmiddlewaretoken":
            data.setdefault(name, []).append(value)
    return post_with_csrf(client, ORDERS, data)


def count(html: str, outcome: str) -> int:
    found = re.search(rf'id="xsm-count-{outcome}">(\d+)<', html)
    assert found is not None, outcome
    return int(found.group(1))


def notes(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def states() -> list[str]:
    return [str(o.status) for o in Order.objects.order_by("pk")]


def test_an_action_per_event_the_user_may_send(backend: Any, root: Client, staff: Any) -> None:
    order_in("cart")  # the changelist shows its actions when it lists a row
    Shipment.objects.create()
    offered = actions(root)
    assert offered["xsm_send:status:SHIP"] == "Send SHIP to the selected orders"
    assert {k for k in offered if k.startswith("xsm_send:")} == {
        f"xsm_send:status:{e}" for e in ("ADD", "PAY", "PAY_ANYWAY", "SHIP", "REFUND")
    }
    clerk = staff("clerk", "view_order", "change_order")
    assert "xsm_send:status:REFUND" not in actions(clerk)  # PERMISSIONS: refund_order
    assert "xsm_send:status:SHIP" in actions(clerk)
    viewer = staff("viewer", "view_order")
    assert not any(k.startswith("xsm_send:") for k in actions(viewer))
    # two statecharts on one row: each action names its field
    shipments = actions(root, "/shop-admin/fieldapp/shipment/")
    assert (
        shipments["xsm_send:delivery:PACKED"] == "Send PACKED to the selected shipments (delivery)"
    )
    assert shipments["xsm_send:payment:SHIP"] == "Send SHIP to the selected shipments (payment)"


def test_the_actions_follow_djangos_signature_and_stay_off_the_change_form(
    backend: Any, root: Client
) -> None:
    """Django 6.1 passes ``action_location`` and warns about an override
    without it; its change form's actions get no bulk send."""
    import warnings

    from django.contrib import admin
    from django.test import RequestFactory

    from tests.django.admin.sites import shop_site

    model_admin = shop_site._registry[Order]
    order_in("cart")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        html = root.get(ORDERS).content.decode()
    assert "xsm_send:status:SHIP" in html
    assert not [w for w in caught if "action_location" in str(w.message)]
    location = getattr(admin.options, "ActionLocation", None)
    if location is not None:  # Django 6.1+
        request = RequestFactory().get(ORDERS)
        request.user = User.objects.get(username="root")
        on_form = model_admin.get_actions(request, action_location=location.CHANGE_FORM)
        assert not any(name.startswith("xsm_send:") for name in on_form)
        on_list = model_admin.get_actions(request, action_location=location.CHANGE_LIST)
        assert "xsm_send:status:SHIP" in on_list


def test_the_preview_counts_and_sends_nothing(backend: Any, root: Client) -> None:
    orders = [order_in("paid"), order_in("paid"), order_in("cart")]
    response = act(root, "xsm_send:status:SHIP", *orders)
    html = response.content.decode()
    assert response.status_code == 200
    assert (count(html, "accept"), count(html, "refuse"), count(html, "error")) == (2, 1, 0)
    assert "no transition" in html.split('id="xsm-bulk-reasons"', 1)[1]
    assert states() == ["paid", "paid", "cart"]


def test_the_confirmation_applies_once_when_submitted_twice(backend: Any, root: Client) -> None:
    orders = [order_in("paid"), order_in("paid"), order_in("cart")]
    preview = act(root, "xsm_send:status:SHIP", *orders)
    first = confirm(root, preview)
    html = first.content.decode()
    assert first.status_code == 200, html[:2000]
    assert (count(html, "sent"), count(html, "refuse"), count(html, "error")) == (2, 1, 0)
    assert '<td class="xsm-mono">cart</td>' in html  # the refused row's state
    assert states() == ["shipped", "shipped", "cart"]  # the columns moved
    logged = LogEntry.objects.filter(action_flag=CHANGE)
    assert sorted(e.object_id for e in logged) == sorted([str(orders[0].pk), str(orders[1].pk)])
    assert all("Sent SHIP (bulk send" in e.get_change_message() for e in logged)
    versions = [Order.objects.get(pk=o.pk).status.version for o in orders]
    again = confirm(root, preview).content.decode()  # the browser's double submit
    assert (count(again, "sent"), count(again, "duplicate")) == (0, 2)
    assert [Order.objects.get(pk=o.pk).status.version for o in orders] == versions
    assert LogEntry.objects.filter(action_flag=CHANGE).count() == 2


def test_a_row_deleted_before_the_confirmation_is_an_error_row(backend: Any, root: Client) -> None:
    kept, gone = order_in("paid"), order_in("paid")
    preview = act(root, "xsm_send:status:SHIP", kept, gone)
    gone_pk = gone.pk
    gone.delete()
    html = confirm(root, preview).content.decode()
    assert (count(html, "sent"), count(html, "error")) == (1, 1)
    assert f"No order with ID “{gone_pk}” exists now." in html
    assert states() == ["shipped"]


def test_a_forged_action_without_the_events_permission_sends_nothing(
    backend: Any, staff: Any
) -> None:
    clerk = staff("clerk", "view_order", "change_order")
    order = order_in("paid")
    response = act(clerk, "xsm_send:status:REFUND", order)
    assert response.status_code == 302
    assert notes(response) == ["No action selected."]
    assert states() == ["paid"]


def test_past_the_bound_nothing_is_sent(xsm: Any, backend: Any, root: Client) -> None:
    xsm(ADMIN={"BULK_MAX": 2})
    orders = [order_in("paid") for _ in range(3)]
    response = act(root, "xsm_send:status:SHIP", *orders)
    assert response.status_code == 302
    assert notes(response) == [
        "3 orders are selected; a bulk send acts on at most 2 (XSM['ADMIN']['BULK_MAX']). "
        "Select fewer. Nothing was sent."
    ]
    assert states() == ["paid"] * 3


def test_redis_down_is_an_admin_message(backend: Any, root: Client, xsm: Any) -> None:
    orders = [order_in("paid"), order_in("paid")]
    preview = act(root, "xsm_send:status:SHIP", *orders)
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    down = act(root, "xsm_send:status:SHIP", *orders)
    assert down.status_code == 302 and notes(down) == [UNAVAILABLE]
    sent = confirm(root, preview)
    html = sent.content.decode()
    assert sent.status_code == 200
    assert count(html, "error") == 2 and notes(sent) == [UNAVAILABLE]
    assert not LogEntry.objects.exists()


def test_shipments_send_to_the_chosen_field_only(backend: Any, root: Client) -> None:
    shipment = Shipment.objects.create()
    data = {
        "action": "xsm_send:delivery:PACKED",
        "index": "0",
        "select_across": "0",
        "_selected_action": [str(shipment.pk)],
    }
    preview = post_with_csrf(root, "/shop-admin/fieldapp/shipment/", data)
    html = preview.content.decode()
    assert count(html, "accept") == 1
    form = html.split('id="xsm-bulk-apply"', 1)[1].split("</form>", 1)[0]
    posted: dict[str, Any] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form):
        if name != "csrfmiddlewaretoken":
            posted.setdefault(name, []).append(value)
    post_with_csrf(root, "/shop-admin/fieldapp/shipment/", posted)
    fresh = Shipment.objects.get(pk=shipment.pk)
    assert (str(fresh.delivery), str(fresh.payment)) == ("shipping.picked", "cart")
