"""Object-level checks in ``PERMISSIONS`` in the admin: the buttons and the
send page of ``StatechartAdminMixin`` (asked about the row), the XSM
instance browser's event links and send page (asked about the key)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, post_with_csrf, seed_ticket
from tests.django.admin.test_mixin import apply, buttons, change_url, order_in, send_url
from tests.fieldapp import permissions
from tests.fieldapp.models import Order

SMALL = "tests.fieldapp.permissions.small_orders"
LIST = f"{ADMIN}m/ticket/"


@pytest.fixture(autouse=True)
def _calls() -> None:
    permissions.CALLS.clear()


@pytest.fixture
def clerk(db: Any) -> Client:
    """A logged-in staff client that may change and view orders."""
    user = User.objects.create_user("clerk", is_staff=True)
    for codename in ("change_order", "view_order"):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="fieldapp", codename=codename)
        )
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def rules(xsm: Any, machine: str, given: Any) -> None:
    spec = settings.XSM["MACHINES"][machine]
    spec = {**spec} if isinstance(spec, dict) else {"CONFIG": spec}
    xsm(MACHINES={**settings.XSM["MACHINES"], machine: {**spec, "PERMISSIONS": given}})


# --- StatechartAdminMixin: the row --------------------------------------------------------


def test_the_check_decides_each_rows_buttons_and_send(
    backend: Any, clerk: Client, xsm: Any
) -> None:
    rules(xsm, "shop", {"REFUND": SMALL})
    small, big = order_in("paid", total=5), order_in("paid", total=500)
    assert buttons(clerk.get(change_url(small)).content.decode()) == ["SHIP", "REFUND"]
    assert buttons(clerk.get(change_url(big)).content.decode()) == ["SHIP"]
    assert clerk.get(send_url(big, "REFUND")).status_code == 403
    post = post_with_csrf(clerk, send_url(big, "REFUND"), {"step": "apply", "version": "1"})
    assert post.status_code == 403
    assert Order.objects.get(pk=big.pk).status == "paid"
    assert ("clerk", Order.objects.get(pk=big.pk), "REFUND") in permissions.CALLS
    assert apply(clerk, small, "REFUND").status_code == 302
    assert Order.objects.get(pk=small.pk).status == "refunded"


def test_a_check_that_raises_hides_the_button_and_refuses(
    backend: Any, clerk: Client, xsm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rules(xsm, "shop", {"REFUND": "tests.fieldapp.permissions.broken"})
    order = order_in("paid", total=5)
    assert buttons(clerk.get(change_url(order)).content.decode()) == ["SHIP"]
    assert clerk.get(send_url(order, "REFUND")).status_code == 403
    assert all(r.exc_info is None for r in caplog.records if r.name == "django_xsm.permissions")
    assert any("RuntimeError" in r.getMessage() for r in caplog.records)


# --- the instance browser: the key ----------------------------------------------------------


def test_the_browser_links_and_sends_only_what_the_check_grants_for_the_key(
    backend: Any, client_for: Any, xsm: Any
) -> None:
    rules(xsm, "ticket", {"CLOSE": SMALL})
    seed_ticket("d:1")
    seed_ticket("d:1-locked")
    operator: Client = client_for("olga", "view_instance", "send_event")

    def accepted(key: str) -> str:
        html = operator.get(f"{LIST}instance/", {"key": key}).content.decode()
        start = html.index("Accepted now")
        return html[start : html.index("</table>", start)]

    assert "event=CLOSE" in accepted("d:1")
    locked = accepted("d:1-locked")
    assert "CLOSE" in locked and "event=CLOSE" not in locked and "event=BUMP" in locked
    form = operator.get(f"{LIST}send/?key=d:1-locked").content.decode()
    assert '<option value="BUMP">' in form and '<option value="CLOSE">' not in form
    for step in ("preview", "apply"):
        data = {"event": "CLOSE", "payload": "{}", "step": step, "version": "1"}
        refused = post_with_csrf(operator, f"{LIST}send/?key=d:1-locked", data)
        assert refused.status_code == 403
        assert b"You may not send CLOSE to d:1-locked" in refused.content
    assert machines["ticket"].objects.get("d:1-locked").value == "open"
    assert ("olga", "d:1-locked", "CLOSE") in permissions.CALLS
    data = {"event": "CLOSE", "payload": "{}", "step": "apply", "version": "1"}
    assert post_with_csrf(operator, f"{LIST}send/?key=d:1", data).status_code == 302
    assert machines["ticket"].objects.get("d:1").value == "closed"


# --- bulk sends: the event is offered on the permission strings, each row is asked ---------


def test_a_bulk_send_asks_the_check_about_each_row(backend: Any, clerk: Client, xsm: Any) -> None:
    from tests.django.admin.test_bulk_mixin import act, confirm, count

    rules(xsm, "shop", {"REFUND": SMALL})
    small, big = order_in("paid", total=5), order_in("paid", total=500)
    preview = act(clerk, "xsm_send:status:REFUND", small, big)
    html = preview.content.decode()
    assert preview.status_code == 200, html[:2000]
    assert (count(html, "accept"), count(html, "refuse")) == (1, 1)
    done = confirm(clerk, preview).content.decode()
    assert (count(done, "sent"), count(done, "refuse")) == (1, 1)
    assert Order.objects.get(pk=small.pk).status == "refunded"
    assert Order.objects.get(pk=big.pk).status == "paid"
    assert ("clerk", Order.objects.get(pk=big.pk), "REFUND") in permissions.CALLS
