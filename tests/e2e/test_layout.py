"""The XSM admin's instance pages laid out in a real browser, at 1280 and
420 px wide: log times on one line beside long correlation ids, the chart
scaled to the screen, wide tables scrolling in their own box (the page
never scrolls sideways), conditional events marked, and a finished
instance without send or fire."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.registry import machines
from tests.e2e.conftest import fits_the_width
from tests.e2e.test_admin_browser import PERMS, log_in, make_user

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

INSTANCE = "/admin/django_xsm/instance/m/order/instance/?key="
LONG_ID = "req-" + "7f3a9c0e5b2d4f16" * 5  # 84 characters, no break opportunity


def seed_orders() -> None:
    objects = machines["order"].objects
    for i in range(3):
        with objects.open("order:wait", actor="seed", correlation_id=f"{LONG_ID}{i}") as order:
            order.send("ADD_ITEM", sku=f"widget-{i}", qty=1, price_cents=3499)
    objects.send("order:wait", "CHECKOUT", actor="seed", correlation_id=LONG_ID)
    with objects.open("order:done", actor="seed") as order:
        order.send("CANCEL", reason="changed my mind")


def time_lines(page: Any) -> list[int]:
    """How many lines each transition-log time takes."""
    lines: list[int] = page.evaluate(
        """() => [...document.querySelectorAll('#xsm-timeline td.xsm-time time')]
             .map(t => t.getClientRects().length)"""
    )
    return lines


def diagram_box(page: Any) -> dict[str, float]:
    box: dict[str, float] = page.evaluate(
        """() => { const r = document.querySelector('svg.xsm-diagram').getBoundingClientRect();
                   return {left: r.left, right: r.right, inner: window.innerWidth}; }"""
    )
    return box


def test_the_instance_page_fits_at_1280_and_420_px(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("olga", *PERMS)
    seed_orders()
    log_in(page, live_admin, "olga")
    page.goto(f"{live_admin}{INSTANCE}order:wait")

    lines = time_lines(page)
    assert len(lines) == 4 and lines == [1, 1, 1, 1], lines
    conditional = page.locator("#xsm-accepted a.xsm-conditional")
    assert conditional.inner_text() == "PAYMENT_RECEIVED …"
    assert conditional.get_attribute("title") == "needs a payload; a guard decides"
    assert "event=PAYMENT_RECEIVED" in (conditional.get_attribute("href") or "")
    assert page.locator("#xsm-accepted a", has_text="CANCEL").count() == 1
    shot("1280")

    page.set_viewport_size({"width": 420, "height": 900})
    page.reload()
    widths = fits_the_width(page)
    assert widths["scroll"] <= widths["inner"], widths
    box = diagram_box(page)
    assert box["left"] >= 0 and box["right"] <= box["inner"], box
    assert time_lines(page) == [1, 1, 1, 1]
    shot("420")

    page.goto(f"{live_admin}/admin/django_xsm/instance/m/order/?q=w")
    assert page.locator("#xsm-instances a", has_text="order:wait").count() == 1
    assert page.locator("#xsm-searched").inner_text() == "order:w"
    widths = fits_the_width(page)
    assert widths["scroll"] <= widths["inner"], widths
    shot("420-search")


def test_a_finished_instance_shows_no_send_or_fire(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("olga", *PERMS)
    seed_orders()
    log_in(page, live_admin, "olga")
    page.goto(f"{live_admin}{INSTANCE}order:done")
    assert page.locator("#xsm-status").inner_text().startswith("done")
    assert page.locator("#xsm-send").count() == 0
    assert page.locator("#xsm-fire").count() == 0
    assert page.locator("#xsm-forget").count() == 1
    assert "finished" in page.locator("#xsm-finished").inner_text()
    assert page.locator("#xsm-accepted").inner_text() == "—"
    shot("1280")
