"""The XSM admin in a real browser (headless Debian chromium): log in, list
instances, open one, read the diagram and the timeline, send an event
through the confirmation page; and hostile data stays inert."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from django_xsm.registry import machines
from tests.django.admin.conftest import seed_ticket

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
expect = pytest.importorskip("playwright.sync_api").expect

PERMS = ("view_instance", "send_event", "fire_timers", "forget_instance")


def make_user(name: str, *perms: str) -> None:
    user = User.objects.create_user(name, password="secret-pw", is_staff=True)
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="django_xsm", codename=codename)
        )


def log_in(page: Any, base: str, name: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", name)
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")


def test_operator_lists_opens_and_sends_an_event(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("olga", *PERMS)
    seed_ticket("web:1")
    seed_ticket("web:2", bumps=2)
    seed_ticket("web:3")
    machines["ticket"].objects.send("web:3", "CLOSE", actor="carl")

    log_in(page, live_admin, "olga")
    section = page.locator(".app-django_xsm")
    assert section.locator("a", has_text="Instances").count() == 1
    assert page.locator("link[href$='admin/css/base.css']").count() == 1
    shot("01-admin-index")

    section.locator("a", has_text="Instances").first.click()
    page.locator("#xsm-machines a", has_text="ticket").click()
    page.wait_for_url("**/instance/m/ticket/")
    rows = page.locator("#xsm-instances tbody tr")
    expect(rows).to_have_count(3)
    # after the bulk send's checkbox (olga may send events)
    assert rows.nth(2).inner_text().split("\t")[1:4] == ["web:3", "closed", "2"]
    shot("02-instances")

    page.select_option("#xsm-state", "ticket.closed")
    page.click("#xsm-filter input[type=submit]")
    page.wait_for_url("**state=ticket.closed**")
    expect(page.locator("#xsm-instances tbody tr")).to_have_count(1)
    page.fill("#xsm-q", "web:1")
    page.select_option("#xsm-state", "")
    page.click("#xsm-filter input[type=submit]")
    page.wait_for_url("**q=web%3A1**")
    expect(page.locator("#xsm-instances tbody tr")).to_have_count(1)
    page.locator("#xsm-instances a", has_text="web:1").click()
    page.wait_for_url("**/instance/?key=web%3A1")

    # The diagram: the active state is highlighted, the others are not.
    active = page.locator("svg.xsm-diagram g.xsm-active")
    assert active.count() == 1
    assert active.get_attribute("data-state-id") == "ticket.open"
    # the box itself: a rect (built-in layout) or Graphviz's path or polygon
    shape = active.locator(":scope > :is(rect, path, polygon)").first
    assert shape.get_attribute("fill") == "#bfe9c9"
    closed = page.locator('svg.xsm-diagram g[data-state-id="ticket.closed"]')
    assert closed.get_attribute("data-active") == "false"
    assert page.locator("#xsm-state-value").inner_text() == "open"
    # The timeline: one record of the seeding block.
    timeline = page.locator("#xsm-timeline tr.xsm-log-row")
    assert timeline.count() == 1
    assert timeline.first.locator(".xsm-actor").inner_text() == "seed"
    assert "BUMP" in timeline.first.locator(".xsm-event").inner_text()
    shot("03-instance")

    page.click("#xsm-send")
    page.fill("#id_event", "CLOSE")
    page.fill("#id_payload", '{"note": "closed from the browser"}')
    page.fill("#id_reason", "browser test")
    page.click("#xsm-preview")
    expect(page.locator("#xsm-effect")).to_be_visible()
    assert page.locator("#xsm-before").inner_text() == "open"
    assert page.locator("#xsm-after").inner_text() == "closed"
    assert machines["ticket"].objects.get("web:1").value == "open"  # the preview ran nothing
    shot("04-confirm-send")

    page.click("#xsm-apply")
    page.wait_for_selector("ul.messagelist")
    assert "Sent CLOSE: open → closed" in page.locator("ul.messagelist").inner_text()
    assert page.locator("#xsm-state-value").inner_text() == "closed"
    assert page.locator("svg.xsm-diagram g.xsm-active").get_attribute("data-state-id") == (
        "ticket.closed"
    )
    timeline = page.locator("#xsm-timeline tr.xsm-log-row")
    assert timeline.count() == 2
    last = timeline.nth(1)
    assert last.locator(".xsm-actor").inner_text() == "olga"
    assert "CLOSE" in last.locator(".xsm-event").inner_text()
    assert "browser test" in last.inner_text()
    shot("05-after-send")

    record = machines["ticket"].objects.latest("web:1", 1)[0]
    assert (record.actor, record.event_type, record.to_state) == ("olga", "CLOSE", "closed")

    # Sending it again is refused, plainly, before anything is applied.
    page.click("#xsm-send")
    page.fill("#id_event", "CLOSE")
    page.click("#xsm-preview")
    expect(page.locator("#xsm-refused")).to_be_visible()
    assert "Refused: Event 'CLOSE' was not accepted" in page.locator("#xsm-refused").inner_text()
    assert page.locator("#xsm-apply").count() == 0
    shot("06-refused")


def test_read_only_staff_browse_without_action_controls(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("rita", "view_instance")
    seed_ticket("ro:1")
    log_in(page, live_admin, "rita")
    page.goto(f"{live_admin}/admin/django_xsm/instance/m/ticket/instance/?key=ro:1")
    assert page.locator("#xsm-state-value").inner_text() == "open"
    assert page.locator("#xsm-actions").count() == 0
    assert page.locator("form[method=post]").count() <= 1  # the admin's logout form only
    shot("read-only-instance")


def test_an_unreadable_record_is_a_plain_page_not_a_server_error(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    from django_xsm.backend import get_store

    make_user("rita", "view_instance")
    seed_ticket("bad:1")
    store = get_store()
    store.client.hset(store.layout.snapshot("bad:1"), "d", b"{not json")
    log_in(page, live_admin, "rita")
    answer = page.goto(f"{live_admin}/admin/django_xsm/instance/m/ticket/instance/?key=bad:1")
    assert answer is not None and answer.status == 200
    expect(page.locator(".errornote")).to_contain_text("The instance bad:1 cannot be read")
    expect(page.get_by_role("link", name="Back to the list")).to_be_visible()
    shot("unreadable-instance")


def test_hostile_context_is_inert_in_the_browser(
    backend: Any, live_admin: str, page: Any, shot: Any
) -> None:
    make_user("olga", *PERMS)
    key = '<script>window.__xss="key"</script>'
    seed_ticket(
        key,
        note='<script>window.__xss="context"</script>',
        homepage="javascript:window.__xss='href'",
        img="<img src=x onerror=\"window.__xss='img'\">",
    )
    machines["ticket"].objects.send(
        key, "BUMP", actor="<i>mallory</i>", reason="<script>window.__xss='log'</script>"
    )
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    log_in(page, live_admin, "olga")
    for path in ("m/ticket/", "m/ticket/instance/"):
        page.goto(f"{live_admin}/admin/django_xsm/instance/{path}?key={key}")
        page.wait_for_load_state("load")
        assert page.evaluate("window.__xss") is None
        javascript_urls = page.evaluate(
            """() => [...document.querySelectorAll('[href],[src],[action],[formaction]')]
                 .flatMap(e => ['href', 'src', 'action', 'formaction'].map(a => e.getAttribute(a)))
                 .filter(v => v && /^\\s*javascript:/i.test(v))"""
        )
        assert javascript_urls == []
    assert "<script>" in page.locator("#xsm-context pre").inner_text()  # shown as text
    assert "<i>mallory</i>" in page.locator("#xsm-timeline").inner_text()
    assert dialogs == []
    shot("hostile-instance")
