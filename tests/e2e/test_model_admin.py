"""``StatechartAdminMixin`` in a real browser (headless Debian chromium):
an order's change page, an event button, the preview, the confirmation,
and the new state and log row; screenshots at desktop width and at 420 px."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from tests.fieldapp.models import Order

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
expect = pytest.importorskip("playwright.sync_api").expect


def make_clerk(name: str) -> None:
    user = User.objects.create_user(name, password="secret-pw", is_staff=True)
    for codename in ("view_order", "change_order", "refund_order"):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="fieldapp", codename=codename)
        )


def test_a_clerk_refunds_an_order_from_its_change_page(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_clerk("cleo")
    order = Order.objects.create(total=42)
    with order.status.open(actor="shop", context={"items": 0, "token": "tok-secret"}) as chart:
        chart.send("ADD", n=2)
        chart.send("PAY", amount=42)

    page.goto(f"{live_admin}/shop-admin/login/?next=/shop-admin/fieldapp/order/")
    page.fill("#id_username", "cleo")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    page.wait_for_url("**/shop-admin/fieldapp/order/")
    expect(page.locator("td.field-status")).to_have_text(["paid"])
    page.locator("#changelist-filter a", has_text="paid").click()
    page.wait_for_url("**status__exact=paid**")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    shot("01-changelist")

    page.locator("#result_list a", has_text=str(order.pk)).click()
    panel = page.locator("#xsm-status")
    expect(panel.locator(".xsm-state-value")).to_have_text("paid")
    active = panel.locator("svg.xsm-diagram g.xsm-active")
    assert active.get_attribute("data-state-id") == "shop.paid"
    assert "tok-secret" not in panel.inner_text()
    expect(panel.locator("a.xsm-event")).to_have_text(["SHIP", "REFUND"])
    expect(panel.locator("tr.xsm-log-row")).to_have_count(2)
    shot("02-change-page")

    panel.locator("a.xsm-event", has_text="REFUND").click()
    page.wait_for_url("**/statechart/status/send/?event=REFUND")
    assert page.locator("#xsm-before").inner_text() == "paid"
    assert page.locator("#xsm-after").inner_text() == "refunded"
    assert Order.objects.get(pk=order.pk).status == "paid"  # the preview ran nothing
    shot("03-send-preview")

    page.click("#xsm-apply")
    page.wait_for_selector("ul.messagelist")
    assert "Sent REFUND to status: paid → refunded" in page.locator("ul.messagelist").inner_text()
    panel = page.locator("#xsm-status")
    expect(panel.locator(".xsm-state-value")).to_have_text("refunded")
    assert panel.locator("svg.xsm-diagram g.xsm-active").get_attribute("data-state-id") == (
        "shop.refunded"
    )
    rows = panel.locator("tr.xsm-log-row")
    expect(rows).to_have_count(3)
    assert rows.nth(2).locator(".xsm-actor").inner_text() == "cleo"
    assert "REFUND" in rows.nth(2).locator(".xsm-event-type").inner_text()
    assert rows.nth(2).locator(".xsm-reason").inner_text() == "admin"
    expect(panel.locator("a.xsm-event")).to_have_count(0)  # a final state accepts nothing
    shot("04-after-send")
    assert Order.objects.get(pk=order.pk).status == "refunded"

    page.set_viewport_size({"width": 420, "height": 900})
    page.reload()
    expect(page.locator("#xsm-status .xsm-state-value")).to_have_text("refunded")
    # The chart and the log scroll inside their boxes; the page does not.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 420, width
    shot("05-change-page-420px")
