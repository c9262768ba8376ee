"""The demo's order pages (testproject) in a real browser: orders created
through the JSON API, then the list (newest first) and an order's page
(prices in dollars, the pending timer's due time in UTC like every other
time), at 1280 and 420 px, never scrolling sideways."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.e2e.conftest import fits_the_width

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

UTC_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def api(page: Any, base: str, path: str, body: Any, key: str) -> Any:
    response = page.request.post(
        f"{base}{path}",
        data=json.dumps(body),
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
    )
    assert response.ok, (response.status, response.text())
    return response.json()


def test_the_demo_lists_orders_and_shows_one(
    backend: Any, live_demo: str, page: Any, shot: Any
) -> None:
    older = api(
        page,
        live_demo,
        "/api/orders",
        {"items": [{"sku": "gizmo-with-a-rather-long-name", "qty": 1, "price_cents": 3499}]},
        "demo-1",
    )
    api(page, live_demo, f"/api/orders/{older['id']}/checkout", {}, "demo-2")
    newer = api(
        page,
        live_demo,
        "/api/orders",
        {"items": [{"sku": "widget", "qty": 2, "price_cents": 1250}]},
        "demo-3",
    )

    page.goto(f"{live_demo}/")
    rows = page.locator("table tbody tr")
    assert rows.count() == 2
    assert f"order:{newer['id']}" in rows.nth(0).inner_text()  # newest first
    assert f"order:{older['id']}" in rows.nth(1).inner_text()
    assert re.search(UTC_TIME, rows.nth(0).inner_text())
    shot("list-1280")

    page.goto(f"{live_demo}/orders/{older['id']}/")
    assert page.locator("#state").inner_text() == "awaiting_payment"
    body = page.locator("body").inner_text()
    assert "$34.99" in body and "¢" not in body
    timer = page.locator("li", has_text="due at").inner_text()
    assert re.search(rf"due at {UTC_TIME}$", timer), timer
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", body)  # no raw ISO time anywhere
    shot("detail-1280")

    page.set_viewport_size({"width": 420, "height": 900})
    for url, name in ((f"/orders/{older['id']}/", "detail-420"), ("/", "list-420")):
        page.goto(f"{live_demo}{url}")
        widths = fits_the_width(page)
        assert widths["scroll"] <= widths["inner"], (url, widths)
        shot(name)
