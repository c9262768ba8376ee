"""The outbox in the demo shop, in a real browser (headless Debian chromium).

A paid order gets its receipt once the outbox drains; an order shipped via
the flaky warehouse is retried, dead-lettered and compensated
(``xsm.outbox.failed`` -> ``shipping_failed``), shown on the admin's Outbox
page, redriven from there, and finally shipped from the main warehouse.

The worker is driven by the test, deterministically: ``drain()`` (what
``manage.py xsm_run_outbox --once`` runs) or one ``run_batch()``, in this
process, on the store the live server uses. Retries wait 0 s
(``BACKOFF_S: 0``), so one drain runs every attempt that is left.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry

from django_xsm.backend.build import get_outbox
from django_xsm.outbox import Delivery, OutboxWorker, WorkResult, drain
from django_xsm.registry import machines
from testproject.orders.effects import send_receipt
from testproject.orders.models import Order, Receipt
from tests.e2e.conftest import fits_the_width
from tests.e2e.test_admin_browser import log_in, make_user

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
expect = pytest.importorskip("playwright.sync_api").expect

OUTBOX_PAGE = "/admin/django_xsm/instance/outbox/"
ATTEMPTS = 3


@pytest.fixture
def worker(backend: Any, xsm: Any) -> Callable[[], OutboxWorker]:
    """The demo's handlers with 3 attempts and no wait between them; a new
    worker each call, on the settings of the moment."""
    xsm(
        OUTBOX={
            "HANDLERS": {
                "order.paid": "testproject.orders.effects.send_receipt",
                "order.shipped": "testproject.orders.effects.ship_to_warehouse",
            },
            "MAX_ATTEMPTS": ATTEMPTS,
            "BACKOFF_S": 0,
            "MAX_BACKOFF_S": 0,
        }
    )
    return lambda: OutboxWorker.from_settings(consumer="e2e-worker")


def run_outbox(worker: Callable[[], OutboxWorker]) -> WorkResult:
    return drain(worker(), max_seconds=30)


def paid_order(page: Any, base: str) -> str:
    """An order created through the JSON API and paid with the order page's
    "Simulate payment webhook" button; its id."""
    key = iter(range(100))

    def api(path: str, body: Any) -> Any:
        response = page.request.post(
            f"{base}{path}",
            data=json.dumps(body),
            headers={"Content-Type": "application/json", "Idempotency-Key": f"e2e-{next(key)}"},
        )
        assert response.ok, (response.status, response.text())
        return response.json()

    order = api("/api/orders", {"items": [{"sku": "widget", "qty": 2, "price_cents": 1250}]})
    api(f"/api/orders/{order['id']}/checkout", {})
    page.goto(f"{base}/orders/{order['id']}/")
    page.click("text=Simulate payment webhook")
    expect(page.locator("#state")).to_have_text("paid")
    return str(order["id"])


def test_a_paid_order_gets_its_receipt_once_the_outbox_drains(
    worker: Callable[[], OutboxWorker], live_demo: str, page: Any, shot: Any
) -> None:
    order_id = paid_order(page, live_demo)
    # the event is stored with the payment; nothing delivered it yet
    expect(page.locator("#no-receipt")).to_be_visible()
    assert not Receipt.objects.exists()
    shot("01-paid-receipt-pending")

    result = run_outbox(worker)
    assert (result.taken, result.delivered) == (1, 1)
    page.reload()
    rows = page.locator("#receipts tbody tr")
    expect(rows).to_have_count(1)
    assert "order.paid" in rows.inner_text() and "$25.00" in rows.inner_text()
    [receipt] = Receipt.objects.all()
    assert (receipt.order_id, receipt.event_type, receipt.amount_cents) == (
        order_id,
        "order.paid",
        2500,
    )
    assert receipt.delivery_id in rows.inner_text()
    shot("02-receipt-sent")

    # a redelivery of the same event (same delivery id) sends no second receipt
    order = machines["order"].objects.get(f"order:{order_id}")
    again = Delivery(receipt.delivery_id, order.key, "order", order.version, attempt=2)
    send_receipt({"type": "order.paid"}, delivery=again)
    assert Receipt.objects.count() == 1
    assert run_outbox(worker).taken == 0  # nothing left to deliver


def test_a_flaky_shipment_is_dead_lettered_compensated_and_redriven(
    worker: Callable[[], OutboxWorker], live_demo: str, page: Any, shot: Any
) -> None:
    make_user("otto", "view_instance", "redrive_outbox")
    order_id = paid_order(page, live_demo)
    key = f"order:{order_id}"
    run_outbox(worker)  # the receipt

    page.click("#ship-flaky")
    expect(page.locator("#state")).to_have_text("shipping")
    expect(page.locator("#shipping-note")).to_be_visible()
    first = worker().run_batch()
    assert (first.taken, first.retried) == (1, 1)

    # the admin shows the retry waiting, with its error
    log_in(page, live_demo, "otto")
    page.goto(f"{live_demo}{OUTBOX_PAGE}")
    expect(page.locator("#xsm-outbox-retrying")).to_have_text("1")
    waiting = page.locator("#xsm-outbox-waiting tr.xsm-waiting")
    expect(waiting).to_have_count(1)
    assert key in waiting.inner_text() and "order.shipped" in waiting.inner_text()
    assert "flaky warehouse: 503" in waiting.locator(".xsm-error").inner_text()
    expect(page.locator("#xsm-outbox-dead-letters tr.xsm-dead-letter")).to_have_count(0)
    shot("03-outbox-retrying")

    # attempts run out: a dead letter, and the order is told
    rest = run_outbox(worker)
    assert (rest.dead_lettered, rest.compensated) == (1, 1)
    page.reload()
    expect(page.locator("#xsm-outbox-dead")).to_contain_text("1")
    letter = page.locator("#xsm-outbox-dead-letters tr.xsm-dead-letter")
    expect(letter).to_have_count(1)
    assert letter.locator(".xsm-event-type").inner_text() == "order.shipped"
    assert letter.locator(".xsm-attempts").inner_text() == str(ATTEMPTS)
    assert "flaky warehouse: 503" in letter.locator(".xsm-error").inner_text()
    delivery_id = letter.locator(".xsm-delivery-id").inner_text()
    [dead] = get_outbox().dead_letters()
    assert dead.entry.delivery_id == delivery_id and dead.entry.key == key
    shot("04-outbox-dead-letter")
    page.set_viewport_size({"width": 420, "height": 900})
    widths = fits_the_width(page)
    assert widths["scroll"] <= widths["inner"], widths  # wide tables scroll in their box
    shot("04b-outbox-dead-letter-420px")
    page.set_viewport_size({"width": 1280, "height": 900})

    # the key links to the instance page, where the compensation is in the log
    letter.locator("a", has_text=key).click()
    expect(page.locator("#xsm-state-value")).to_have_text("shipping_failed")
    log = page.locator("#xsm-timeline tr.xsm-log-row").last
    assert "xsm.outbox.failed" in log.locator(".xsm-event").inner_text()
    assert log.locator(".xsm-actor").inner_text() == "xsm:outbox"
    shot("05-instance-compensated")

    page.goto(f"{live_demo}/orders/{order_id}/")
    expect(page.locator("#state")).to_have_text("shipping_failed")
    expect(page.locator("#shipping-failed")).to_contain_text(f"after {ATTEMPTS} attempts")
    expect(page.locator("#shipping-failed")).to_contain_text("flaky warehouse: 503")
    assert Order.objects.get(pk=order_id).status == "shipping_failed"
    shot("06-order-shipping-failed")

    # redrive it from the Outbox page: confirmation, then back in the outbox
    page.goto(f"{live_demo}{OUTBOX_PAGE}")
    page.click("a.xsm-redrive")
    expect(page.locator("#xsm-redrive-id")).to_have_text(delivery_id)
    shot("07-redrive-confirm")
    page.click("#xsm-redrive-confirm")
    page.wait_for_url(f"**{OUTBOX_PAGE}")
    expect(page.locator("ul.messagelist")).to_contain_text(f"Redrove outbox delivery {delivery_id}")
    expect(page.locator("#xsm-outbox-dead-letters tr.xsm-dead-letter")).to_have_count(0)
    pending = page.locator("#xsm-outbox-pending-entries tr.xsm-pending")
    expect(pending).to_have_count(1)
    assert pending.locator(".xsm-delivery-id").inner_text() == delivery_id  # the same id
    assert pending.locator(".xsm-attempts").inner_text() == "0"
    [log_entry] = LogEntry.objects.all()
    assert log_entry.object_id == f"order:{key}" and log_entry.user.username == "otto"
    shot("08-redriven")

    # still the flaky warehouse: it fails again and is dead-lettered again; the
    # order stays compensating (told once per delivery id: the second
    # xsm.outbox.failed replays the first)
    again = run_outbox(worker)
    assert (again.dead_lettered, again.compensated) == (1, 1)
    page.goto(f"{live_demo}/orders/{order_id}/")
    expect(page.locator("#state")).to_have_text("shipping_failed")
    history = machines["order"].objects.history(key)
    assert [r.event_type for r in history].count("xsm.outbox.failed") == 1

    # switch to the main warehouse, redrive all: shipped, with one receipt
    page.click("#switch-warehouse")
    expect(page.locator("#switched")).to_be_visible()
    page.goto(f"{live_demo}{OUTBOX_PAGE}")
    page.click("#xsm-redrive-all")
    expect(page.locator("#xsm-redrive-all-count")).to_have_text("1")
    page.click("#xsm-redrive-all-confirm")
    expect(page.locator("ul.messagelist")).to_contain_text("1 back in the outbox")
    done = run_outbox(worker)
    assert (done.taken, done.delivered) == (1, 1)
    page.goto(f"{live_demo}/orders/{order_id}/")
    expect(page.locator("#state")).to_have_text("shipped")
    assert "main warehouse" in page.locator("body").inner_text()
    expect(page.locator("#receipts tbody tr")).to_have_count(1)
    shot("09-order-shipped")
    page.goto(f"{live_demo}{OUTBOX_PAGE}")
    for counter in ("pending", "retrying", "dead"):
        expect(page.locator(f"#xsm-outbox-{counter}")).to_have_text("0")
    expect(page.locator("#xsm-outbox-dead-letters")).to_contain_text("No dead letters.")
    shot("10-outbox-empty")
    assert LogEntry.objects.count() == 2
