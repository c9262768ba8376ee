"""Every column and every button of the admin pages django-xsm adds, in a
real browser at 1280 and 420 px wide.

The pages are filled with the longest things they meet in practice:
84-character correlation ids, 60-character keys, delivery ids, a
warehouse's error message, reasons naming a delivery, long state names.
For each page, every table header and cell and every button, submit and
action link of the content is checked with its bounding box:

* at 1280 px it stands inside the viewport without scrolling anything
  sideways (no table needs its scroll box at desktop width);
* at 420 px it is inside the viewport once scrolled to (its scroll box
  scrolling sideways if it has to), not clipped by any box around it,
  and nothing covers it (the browser's hit test finds it);
* at both widths the page itself never scrolls sideways: only a table's
  own box may.

Screenshots (full page) go to ``$XSM_ARTIFACTS/screenshots``, one per
page and width (``test_screens…--<page>-<width>.png``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from django_xsm.backend.build import get_outbox
from django_xsm.registry import machines
from tests.e2e.test_admin_browser import PERMS, log_in, make_user
from tests.e2e.test_model_admin import make_clerk
from tests.fieldapp.models import Order

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ADMIN = "/admin/django_xsm/instance/"
WIDTHS = (1280, 420)
CORRELATION = "req-" + "7f3a9c0e5b2d4f16" * 5  # 84 characters, no break opportunity
LONG_KEY = "order:" + "c0ffee42" * 7 + "d00d"  # 66 characters
ERROR = "WarehouseUnavailable: flaky warehouse: 503 Service Unavailable (attempt 3)"

#: What a page's checked elements are: the headers and cells of its tables
#: and its buttons, submits and action links (Django's and django-xsm's).
CHECKED = ", ".join(
    f"{scope} {what}"
    for scope in ("#content",)
    for what in (
        "th",
        "td",
        "input[type=submit]",
        "button",
        "a.button",
        ".submit-row a",
        "a.deletelink",
    )
)

REACHABLE = """
([selector, fit]) => {
  const vw = window.innerWidth;
  const problems = [];
  const page = document.scrollingElement;
  if (page.scrollWidth > vw + 0.5) {
    problems.push(`the page scrolls sideways: ${page.scrollWidth} > ${vw}`);
  }
  const name = (el) => {
    const text = (el.innerText || el.value || '').trim().replace(/\\s+/g, ' ').slice(0, 40);
    const id = el.id ? '#' + el.id : '';
    const cls = el.className ? '.' + String(el.className).split(' ')[0] : '';
    return `${el.tagName.toLowerCase()}${id}${cls} "${text}"`;
  };
  const boxes = (el) => {
    const found = [];
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') found.push(a);
    }
    return found;
  };
  const shown = [...document.querySelectorAll(selector)].filter(
    (el) => el.getClientRects().length && getComputedStyle(el).visibility !== 'hidden'
      && !el.closest('details:not([open]) > :not(summary)'));
  for (const el of shown) {
    const around = boxes(el);
    if (fit) {
      for (const a of around) {
        if (a.scrollWidth > a.clientWidth + 1 && a !== document.body) {
          const wide = `${a.scrollWidth} > ${a.clientWidth}`;
          problems.push(`${name(el)}: its box ${name(a)} must scroll sideways (${wide})`);
        }
      }
    }
    el.scrollIntoView({block: 'center', inline: 'center'});
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) { problems.push(`${name(el)}: no size`); continue; }
    if (r.left < -0.5 || r.right > vw + 0.5) {
      const span = `${r.left.toFixed(0)}..${r.right.toFixed(0)}`;
      problems.push(`${name(el)}: ${span} is outside the ${vw} px viewport`);
    }
    for (const a of around) {
      const c = a.getBoundingClientRect();
      if (r.left < c.left - 0.5 || r.right > c.right + 0.5) {
        problems.push(`${name(el)}: clipped by ${name(a)}`);
      }
    }
    const x = (Math.max(r.left, 0) + Math.min(r.right, vw)) / 2;
    const y = (Math.max(r.top, 0) + Math.min(r.bottom, window.innerHeight)) / 2;
    const hit = document.elementFromPoint(x, y);
    if (!hit || !(el === hit || el.contains(hit))) {
      problems.push(`${name(el)}: covered by ${hit ? name(hit) : 'nothing'}`);
    }
  }
  window.scrollTo(0, 0);
  for (const a of document.querySelectorAll('*')) { if (a.scrollLeft) a.scrollLeft = 0; }
  return {checked: shown.length, problems: [...new Set(problems)]};
}
"""


class Screens:
    """Checks pages at each width, gathering what is wrong on each (the
    test reports every page's problems at once)."""

    def __init__(self, page: Any, shot: Callable[[str], Any]) -> None:
        self.page, self.shot = page, shot
        self.problems: list[str] = []

    def check(self, name: str, width: int) -> int:
        """Check the page as it is at ``width``; the elements checked."""
        found = self.page.evaluate(REACHABLE, [CHECKED, width >= 1000])
        self.shot(f"{name}-{width}")
        self.problems += [f"{name} at {width} px: {p}" for p in found["problems"]]
        return int(found["checked"])

    def visit(self, name: str, url: str) -> int:
        """Open ``url`` at each width and check it there."""
        total = 0
        for width in WIDTHS:
            self.page.set_viewport_size({"width": width, "height": 900})
            self.page.goto(url)
            total += self.check(name, width)
        return total

    def assert_clean(self) -> None:
        assert not self.problems, "\n".join(self.problems)


def seed_orders() -> None:
    """Orders through payment and a flaky shipment, with long ids; the
    outbox holds two dead letters, one retry and pending entries."""
    objects = machines["order"].objects
    for n, key in enumerate(["order:8899dae63f865ff9", LONG_KEY, "order:1ae26604b1a2009f"]):
        with objects.open(key, actor="storefront", correlation_id=f"{CORRELATION}{n}") as order:
            order.send("ADD_ITEM", sku=f"widget-{n}", qty=1, price_cents=3499)
            order.send("CHECKOUT")
        objects.send(
            key,
            "PAYMENT_RECEIVED",
            actor="payments",
            reason=f"webhook evt_{'3f9a0c' * 6}",
            correlation_id=CORRELATION,
            payment_id=f"pay_{'8899dae63f865ff9' * 2}",
            amount_cents=3499,
        )
        objects.send(
            key,
            "SHIP",
            actor="warehouse-integration",
            reason=f"outbox delivery {'1ae26604b1a2009f5360fe1e' * 2}-0 dead-lettered",
            correlation_id=CORRELATION,
            warehouse="flaky",
            tracking=f"TRACK-{'4567' * 8}",
        )
    outbox = get_outbox()
    for lease in outbox.take("storefront-worker-7f3a9c0e5b2d", count=2):
        assert outbox.fail(lease, ERROR, retry_at_ms=None) == "dead"
    [lease] = outbox.take("storefront-worker-7f3a9c0e5b2d", count=1)
    retry_at = time.time_ns() // 1_000_000 + 3_600_000
    assert outbox.fail(lease, f"{ERROR} " * 3, retry_at_ms=retry_at) == "retry"
    outbox.take("storefront-worker-held-lease-1ae26604b1a2009f", count=1)  # held, not failed


@pytest.fixture
def screens(page: Any, shot: Any) -> Screens:
    return Screens(page, shot)


def test_the_xsm_pages_show_every_column_and_button(
    backend: Any, live_admin: str, page: Any, screens: Screens
) -> None:
    make_user("olga", *PERMS, "redrive_outbox")
    seed_orders()
    log_in(page, live_admin, "olga")
    base = f"{live_admin}{ADMIN}"
    key = quote(LONG_KEY)
    assert screens.visit("machines", base) > 10
    assert screens.visit("instances", f"{base}m/order/") > 20
    assert screens.visit("instance", f"{base}m/order/instance/?key={key}") > 60
    assert page.locator("#xsm-timeline th", has_text="Version").count() == 1
    assert screens.visit("send", f"{base}m/order/send/?key={key}&event=WAREHOUSE_CONFIRMED") > 3
    assert screens.visit("forget", f"{base}m/order/forget/?key={key}") > 1

    count = screens.visit("outbox", f"{base}outbox/")
    assert count > 40
    assert page.locator("#xsm-outbox-dead-letters a.xsm-redrive").count() == 2
    page.locator("#xsm-outbox-dead-letters a.xsm-redrive").first.click()
    assert screens.visit("redrive", page.url) > 10
    screens.visit("redrive-all", f"{base}outbox/redrive-all/")

    # the send preview: what would change, and the confirmation
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}m/order/send/?key={key}&event=WAREHOUSE_CONFIRMED")
    page.fill("#id_reason", "customer asked by e-mail " + "x" * 60)
    page.click("#xsm-preview")
    page.wait_for_selector("#xsm-effect")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        assert screens.check("send-preview", width) > 10
    assert page.locator("#xsm-apply").count() == 1
    screens.assert_clean()


def test_the_model_admin_pages_show_every_column_and_button(
    backend: Any, live_admin: str, page: Any, screens: Screens
) -> None:
    make_clerk("cleo")
    order = Order.objects.create(total=42)
    long_reason = f"charge ch_{'3MtwBwLkdIwHu7ix' * 3} captured"
    order.status.send("ADD", n=2, actor="storefront-checkout-service", reason=long_reason)
    order.status.send("PAY", amount=42, actor="payments", reason=long_reason)
    page.goto(f"{live_admin}/shop-admin/login/?next=/shop-admin/fieldapp/order/")
    page.fill("#id_username", "cleo")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    page.wait_for_url("**/shop-admin/fieldapp/order/")
    base = f"{live_admin}/shop-admin/fieldapp/order/"
    assert screens.visit("changelist", base) > 3
    assert screens.visit("change", f"{base}{order.pk}/change/") > 20
    assert page.locator("#xsm-status th", has_text="Version").count() >= 1
    send = f"{base}{order.pk}/statechart/status/send/?event=REFUND"
    assert screens.visit("statechart-send", send) > 8
    assert page.locator("#xsm-apply").count() == 1
    screens.assert_clean()
