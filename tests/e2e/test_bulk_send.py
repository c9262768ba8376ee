"""Bulk sends in a real browser (headless Debian chromium): check
instances on the XSM browser's list page (or rows of a changelist), preview
who accepts and who refuses, confirm, read each row's outcome; screenshots
of the preview and the results."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from django_xsm.registry import machines
from tests.django.admin.conftest import seed_ticket
from tests.e2e.conftest import fits_the_width
from tests.fieldapp.models import Order

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
expect = pytest.importorskip("playwright.sync_api").expect


def make_user(name: str, app_label: str, *perms: str) -> None:
    user = User.objects.create_user(name, password="secret-pw", is_staff=True)
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )


def log_in(page: Any, url: str, name: str) -> None:
    page.goto(url)
    page.fill("#id_username", name)
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")


def test_an_operator_closes_tickets_in_bulk(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("olga", "django_xsm", "view_instance", "send_event")
    seed_ticket("bulk:1")
    seed_ticket("bulk:2", bumps=2)
    seed_ticket("bulk:3", count=-1)  # count 0: CLOSE's guard refuses
    seed_ticket("bulk:4")

    log_in(page, f"{live_admin}/admin/login/?next=/admin/django_xsm/instance/m/ticket/", "olga")
    page.wait_for_url("**/m/ticket/")
    for key in ("bulk:1", "bulk:2", "bulk:3"):
        page.check(f"input[name=sel][value='ticket:{key}']")
    page.select_option("#xsm-bulk-event", "CLOSE")
    shot("01-selected")
    page.click("#xsm-bulk-go")

    expect(page.locator("#xsm-count-accept")).to_have_text("2")
    expect(page.locator("#xsm-count-refuse")).to_have_text("1")
    expect(page.locator("#xsm-bulk-reasons li")).to_have_count(1)
    expect(page.locator("#xsm-bulk-rows tbody tr")).to_have_count(3)
    assert machines["ticket"].objects.get("bulk:1").value == "open"  # nothing sent yet
    sizes = fits_the_width(page)
    assert sizes["scroll"] <= sizes["inner"], sizes
    shot("02-preview")

    page.click("#xsm-bulk-confirm")
    expect(page.locator("#xsm-count-sent")).to_have_text("2")
    expect(page.locator("tr.xsm-bulk-sent")).to_have_count(2)
    expect(page.locator("tr.xsm-bulk-refuse")).to_have_count(1)
    shot("03-results")
    assert [machines["ticket"].objects.get(f"bulk:{n}").value for n in (1, 2, 3, 4)] == [
        "closed",
        "closed",
        "open",
        "open",
    ]

    # A selection spanning two machines (ticket and desk) is offered only
    # the events both know: BUMP is refused, CLOSE offered.
    machines["desk"].objects.send("desk:web", "ASSIGN", create=True, actor="seed")
    page.goto(f"{live_admin}/admin/django_xsm/instance/m/ticket/")
    page.check("input[name=sel][value='ticket:bulk:4']")
    page.evaluate(
        """() => { const box = document.createElement('input');
        Object.assign(box, {type: 'hidden', name: 'sel', value: 'desk:desk:web'});
        document.getElementById('xsm-bulk-form').appendChild(box); }"""
    )
    page.select_option("#xsm-bulk-event", "BUMP")
    page.click("#xsm-bulk-go")
    expect(page.locator("#xsm-bulk-error")).to_contain_text("'BUMP' is not an event")
    expect(page.locator("#xsm-bulk-event option")).to_have_text(["CLOSE"])
    shot("04-choose")
    page.click("#xsm-bulk-preview")
    expect(page.locator("#xsm-count-accept")).to_have_text("2")


def test_a_clerk_ships_orders_from_the_changelist(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("cleo", "fieldapp", "view_order", "change_order")
    orders = [Order.objects.create(total=n) for n in (10, 20, 30)]
    for order in orders[:2]:
        order.status.send("PAY_ANYWAY", actor="shop")

    log_in(page, f"{live_admin}/shop-admin/login/?next=/shop-admin/fieldapp/order/", "cleo")
    page.wait_for_url("**/shop-admin/fieldapp/order/")
    page.check("#action-toggle")
    page.select_option("select[name=action]", "xsm_send:status:SHIP")
    page.click("button[name=index]")
    expect(page.locator("#xsm-count-accept")).to_have_text("2")
    expect(page.locator("#xsm-count-refuse")).to_have_text("1")
    shot("01-preview")

    page.click("#xsm-bulk-confirm")
    expect(page.locator("#xsm-count-sent")).to_have_text("2")
    shot("02-results")
    assert sorted(str(Order.objects.get(pk=o.pk).status) for o in orders) == [
        "cart",
        "shipped",
        "shipped",
    ]
