"""The read-only pages: machines, the instances list, the instance page."""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from django_xsm.persistence.records import TimerFailure
from django_xsm.persistence.timer_state import failure_key
from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, seed_ticket

LIST = f"{ADMIN}m/ticket/"


@pytest.fixture
def reader(backend: Any, client_for: Any) -> Any:
    return client_for("reader", "view_instance")


def listed_keys(response: Any) -> list[str]:
    return re.findall(r'<a href="[^"]*" class="xsm-mono">([^<]*)</a>', response.content.decode())


def next_link(response: Any) -> str:
    found = re.search(r'href="([^"]*)" id="xsm-next"', response.content.decode())
    return found.group(1).replace("&amp;", "&") if found else ""


def test_machines_page_lists_the_registered_machines(reader: Any) -> None:
    html = reader.get(ADMIN).content.decode()
    assert f'href="{ADMIN}m/ticket/"' in html
    assert f'href="{ADMIN}m/order/"' in html
    assert "Dead-lettered timers" in html


def test_the_list_shows_key_state_version_updated_and_next_deadline(reader: Any) -> None:
    seed_ticket("t:1", bumps=2)
    with machines["ticket"].objects.open("t:2") as t:
        t.send("BUMP")
    machines["ticket"].objects.send("t:2", "CLOSE")
    response = reader.get(LIST)
    assert response.status_code == 200
    html = response.content.decode()
    assert listed_keys(response) == ["t:1", "t:2"]
    row1 = html[html.index(">t:1<") : html.index(">t:2<")]
    assert '<td class="xsm-mono">open' in row1
    assert "<td>1</td>" in row1  # version
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row1)  # updated + deadline
    row2 = html[html.index(">t:2<") :]
    assert "closed" in row2 and "<td>2</td>" in row2
    assert "<td>—</td>" in row2  # closed: no deadline


def test_the_list_pages_with_a_cursor(reader: Any) -> None:
    keys = [f"page:{i:03d}" for i in range(23)]
    for key in keys:
        seed_ticket(key)
    seen: list[str] = []
    url = f"{LIST}?limit=10"
    pages = 0
    while url:
        response = reader.get(url)
        assert response.status_code == 200
        seen += listed_keys(response)
        pages += 1
        url = next_link(response)
        if url:
            assert "after=" in url and "limit=10" in url
    assert seen == keys
    assert pages == 3
    assert 'id="xsm-first"' in reader.get(f"{LIST}?limit=10&after=page:009").content.decode()


def test_search_takes_the_prefix_literally(reader: Any) -> None:
    for key in ("a*b:1", "a*b:2", "axb:1", "a?c", "a[x]1", "b:1"):
        seed_ticket(key)
    assert listed_keys(reader.get(LIST, {"q": "a*b"})) == ["a*b:1", "a*b:2"]
    assert listed_keys(reader.get(LIST, {"q": "a?"})) == ["a?c"]
    assert listed_keys(reader.get(LIST, {"q": "a[x]"})) == ["a[x]1"]
    assert listed_keys(reader.get(LIST, {"q": "a"})) == ["a*b:1", "a*b:2", "a?c", "a[x]1", "axb:1"]
    assert listed_keys(reader.get(LIST, {"q": "zzz"})) == []


def test_filter_by_current_state(reader: Any) -> None:
    for i in range(3):
        seed_ticket(f"s:{i}")
    machines["ticket"].objects.send("s:1", "CLOSE")
    assert listed_keys(reader.get(LIST, {"state": "ticket.closed"})) == ["s:1"]
    assert listed_keys(reader.get(LIST, {"state": "ticket.open"})) == ["s:0", "s:2"]
    assert listed_keys(reader.get(LIST, {"state": "ticket.open", "q": "s:2"})) == ["s:2"]
    # an unknown state id is ignored, not an error
    assert listed_keys(reader.get(LIST, {"state": "nope"})) == ["s:0", "s:1", "s:2"]
    html = reader.get(LIST, {"state": "ticket.closed"}).content.decode()
    assert '<option value="ticket.closed" selected>closed</option>' in html


def test_the_list_is_per_machine(reader: Any) -> None:
    seed_ticket("shared:1")
    assert listed_keys(reader.get(LIST)) == ["shared:1"]
    assert listed_keys(reader.get(f"{ADMIN}m/order/")) == []


def test_unknown_machine_is_404(reader: Any) -> None:
    assert reader.get(f"{ADMIN}m/nope/").status_code == 404
    assert reader.get(f"{ADMIN}m/nope/instance/?key=x").status_code == 404


def test_instance_page_shows_state_versions_context_and_deadlines(reader: Any) -> None:
    seed_ticket("d:1", bumps=3, owner="ada")
    response = reader.get(f"{LIST}instance/", {"key": "d:1"})
    assert response.status_code == 200
    html = response.content.decode()
    assert '<td class="xsm-mono" id="xsm-state-value">open</td>' in html
    assert '<td id="xsm-version">1</td>' in html
    assert "Machine version" in html
    assert "&quot;count&quot;: 3" in html and "&quot;owner&quot;: &quot;ada&quot;" in html
    assert "xstate.after.60000.ticket.open" in html
    # events accepted now (guards evaluated): CLOSE is allowed once bumped
    start = html.index("Accepted now")
    summary = html[start : html.index("</table>", start)]
    assert "BUMP" in summary and "CLOSE" in summary and "REOPEN" not in summary


def test_the_diagram_highlights_the_active_state(reader: Any) -> None:
    seed_ticket("g:1")
    html = reader.get(f"{LIST}instance/", {"key": "g:1"}).content.decode()
    start = html.index('<svg xmlns="http://www.w3.org/2000/svg" class="xsm-diagram"')
    svg = html[start : html.index("</svg>", start)]
    assert re.search(r'class="xsm-state xsm-atomic xsm-active" data-state-id="ticket.open"', svg)
    assert 'data-state-id="ticket.closed" data-active="false"' in svg
    assert "CLOSE → closed [bumped]" in svg
    assert "after 60000 → stale" in svg
    assert "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_dead_lettered_deadlines_are_shown(backend: Any, reader: Any) -> None:
    seed_ticket("dl:1")
    store = backend.store
    record = store.load("dl:1")
    deadline = machines["ticket"].objects.get("dl:1").deadlines[0]
    failure = TimerFailure(attempts=5, next_attempt_ms=0, dead=True, error="RuntimeError: boom")
    assert store.record_timer_failure(
        "dl:1",
        expected_version=record.version,
        failures={failure_key(deadline): failure},
        next_due_ms=None,
    )
    html = reader.get(f"{LIST}instance/", {"key": "dl:1"}).content.decode()
    deadlines = html[html.index('id="xsm-deadlines"') : html.index('id="xsm-context"')]
    assert "dead-lettered" in deadlines and "RuntimeError: boom" in deadlines
    assert "5 attempts" in deadlines
    assert "dead-lettered" in reader.get(LIST).content.decode()
    index = reader.get(ADMIN).content.decode()
    assert f'href="{ADMIN}find/?key=dl%3A1"' in index


def test_the_timeline_shows_the_log_and_pages_by_seq(reader: Any) -> None:
    seed_ticket("log:1")
    for i in range(45):
        machines["ticket"].objects.send(
            "log:1", "BUMP", actor=f"user{i}", reason=f"r{i}", correlation_id=f"c{i}"
        )
    url = f"{LIST}instance/"
    html = reader.get(url, {"key": "log:1"}).content.decode()
    seqs = [int(s) for s in re.findall(r'class="xsm-log-row" data-seq="(\d+)"', html)]
    assert seqs == list(range(27, 47))  # the newest 20, oldest first
    row = html[html.index('data-seq="46"') :]
    for text in ("user44", "BUMP", "open → open", "r44", "c44"):
        assert text in row
    older = re.search(r'href="([^"]*)" id="xsm-log-older"', html)
    assert older is not None
    query = parse_qs(urlsplit(older.group(1).replace("&amp;", "&")).query)
    assert query == {"key": ["log:1"], "after_seq": ["6"]}
    html = reader.get(url, {"key": "log:1", "after_seq": "0"}).content.decode()
    seqs = [int(s) for s in re.findall(r'class="xsm-log-row" data-seq="(\d+)"', html)]
    assert seqs == list(range(1, 21))
    assert 'id="xsm-log-newer"' in html and 'id="xsm-log-latest"' in html
    assert "seed" in html[html.index('data-seq="1"') : html.index('data-seq="2"')]


def test_missing_instance_is_a_plain_404(reader: Any) -> None:
    response = reader.get(f"{LIST}instance/", {"key": "ghost"})
    assert response.status_code == 404
    assert b"There is no ticket instance" in response.content


def test_an_instance_of_another_machine_is_not_shown_under_this_one(reader: Any) -> None:
    seed_ticket("mine:1")
    assert reader.get(f"{ADMIN}m/order/instance/", {"key": "mine:1"}).status_code == 404


def test_find_redirects_to_the_owning_machine(reader: Any) -> None:
    seed_ticket("f:1")
    response = reader.get(f"{ADMIN}find/", {"key": "f:1"})
    assert response.status_code == 302
    assert response["Location"] == f"{LIST}instance/?key=f%3A1"
    assert reader.get(f"{ADMIN}find/", {"key": "nope"}).status_code == 404


def test_admin_history_links_resolve_to_the_instance_page(reader: Any) -> None:
    from django.contrib.admin.utils import quote

    response = reader.get(f"{ADMIN}{quote('ticket:a/b:1')}/change/")
    assert response.status_code == 302
    assert response["Location"] == f"{LIST}instance/?key=a%2Fb%3A1"
    assert reader.get(f"{ADMIN}{quote('nomachine')}/change/").status_code == 404


@pytest.mark.parametrize("key", ["", "a\x01b", "k" * 513])
def test_an_invalid_key_is_a_plain_400(reader: Any, key: str) -> None:
    for url in (f"{LIST}instance/", f"{ADMIN}find/"):
        response = reader.get(url, {"key": key})
        assert response.status_code == 400
        assert b"is not a valid instance key" in response.content


def test_a_search_with_control_characters_matches_nothing(reader: Any) -> None:
    seed_ticket("c:1")
    response = reader.get(LIST, {"q": "c\x00"})
    assert response.status_code == 200
    assert listed_keys(response) == []


def test_breadcrumbs_lead_back_through_machine_and_instance(backend: Any, client_for: Any) -> None:
    seed_ticket("b:1")
    client = client_for("root", superuser=True)
    html = client.get(f"{ADMIN}m/ticket/send/", {"key": "b:1"}).content.decode()
    crumbs = html[html.index('class="breadcrumbs"') :]
    crumbs = crumbs[: min(i for i in (crumbs.find("</ol>"), crumbs.find("</div>")) if i > 0)]
    for href in ("/admin/", "/admin/django_xsm/", ADMIN, LIST, f"{LIST}instance/?key=b%3A1"):
        assert f'href="{href}"' in crumbs
    assert "Send an event" in crumbs


def test_a_damaged_record_is_shown_plainly_never_as_a_traceback(
    reader: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A known condition of the data, not a server error: 200, the page
    says so, and one WARNING without traceback (as the change page's panel)."""
    from django_xsm.backend import get_store

    seed_ticket("t:bad")
    seed_ticket("t:good")
    store = get_store()
    store.client.hset(store.layout.snapshot("t:bad"), "d", b"{not json")
    listing = reader.get(LIST)  # the row says so; the others still show
    assert listing.status_code == 200 and listed_keys(listing) == ["t:bad", "t:good"]
    assert "not valid JSON" in listing.content.decode()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        found = reader.get(f"{ADMIN}find/", {"key": "t:bad"}, follow=True)
    html = found.content.decode()
    assert found.status_code == 200 and "cannot be read" in html and "t:bad" in html
    assert "<title>Unreadable instance" in html
    assert "Traceback" not in html
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert (warning.name, warning.levelno, warning.exc_info) == (
        "django_xsm.admin",
        logging.WARNING,
        None,
    )
    assert "'t:bad'" in warning.getMessage() and "not valid JSON" in warning.getMessage()


# --- a new user's first hour ---------------------------------------------------------

ORDERS = f"{ADMIN}m/order/"


def seed_order(key: str, *events: str) -> None:
    with machines["order"].objects.open(key, actor="seed") as order:
        order.send("ADD_ITEM", sku="widget", qty=1, price_cents=3499)
        for event in events:
            order.send(event)


def test_a_finished_instance_offers_no_send_or_fire(backend: Any, client_for: Any) -> None:
    seed_order("order:done", "CANCEL")
    operator = client_for("olga", "view_instance", "send_event", "fire_timers", "forget_instance")
    html = operator.get(f"{ORDERS}instance/", {"key": "order:done"}).content.decode()
    assert machines["order"].objects.get("order:done").status == "done"
    assert 'id="xsm-send"' not in html and 'id="xsm-fire"' not in html
    assert 'id="xsm-forget"' in html  # a finished instance can still be forgotten
    assert "finished" in html[html.index('id="xsm-actions"') :]
    summary = html[html.index("Accepted now") : html.index("</table>", html.index("Accepted now"))]
    assert "CANCEL" not in summary and "—" in summary


def test_accepted_now_lists_guarded_events_as_conditional(backend: Any, client_for: Any) -> None:
    from django_xsm.fields.events import available_events

    seed_order("order:wait", "CHECKOUT")
    operator = client_for("olga", "view_instance", "send_event")
    html = operator.get(f"{ORDERS}instance/", {"key": "order:wait"}).content.decode()
    start = html.index("Accepted now")
    summary = html[start : html.index("</table>", start)]
    send = f"{ORDERS}send/?key=order%3Await&amp;event="
    assert f'<a href="{send}CANCEL">CANCEL</a>' in summary
    assert (
        f'<a href="{send}PAYMENT_RECEIVED" class="xsm-conditional" '
        'title="needs a payload; a guard decides">PAYMENT_RECEIVED …</a>'
    ) in summary
    # the same list as the model field's (available_events), in the same order
    events = available_events(machines["order"], machines["order"].objects.get("order:wait"))
    assert re.findall(r'event=(\w+)"', summary) == list(events)
    assert {str(e): e.conditional for e in events} == {"CANCEL": False, "PAYMENT_RECEIVED": True}
    # read-only staff see the same list without links
    reader = client_for("rita", "view_instance")
    html = reader.get(f"{ORDERS}instance/", {"key": "order:wait"}).content.decode()
    start = html.index("Accepted now")
    summary = html[start : html.index("</table>", start)]
    assert "<a " not in summary
    assert 'title="needs a payload; a guard decides">PAYMENT_RECEIVED …' in summary


def test_the_log_time_is_compact_beside_long_correlation_ids(reader: Any) -> None:
    seed_ticket("wide:1")
    machines["ticket"].objects.send("wide:1", "BUMP", correlation_id="c" * 80)
    html = reader.get(f"{LIST}instance/", {"key": "wide:1"}).content.decode()
    timeline = html[html.index('id="xsm-timeline"') :]
    assert re.search(
        r'<td class="xsm-time"><time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</time>',
        timeline,
    )
    assert re.search(r"<th>Time \(\w+\)</th>", timeline)
    assert f'<td class="xsm-mono xsm-id" title="{"c" * 80}">' in timeline


def test_search_without_the_machine_prefix(reader: Any) -> None:
    for key in ("order:a1", "order:a2", "order:b1"):
        seed_order(key)
    for q in ("a", "a*", "order:a", "order:a*"):
        assert listed_keys(reader.get(ORDERS, {"q": q})) == ["order:a1", "order:a2"], q
    assert listed_keys(reader.get(ORDERS, {"q": "order:a1"})) == ["order:a1"]
    assert listed_keys(reader.get(ORDERS, {"q": "a1"})) == ["order:a1"]
    assert listed_keys(reader.get(ORDERS, {"q": "*"})) == ["order:a1", "order:a2", "order:b1"]
    assert listed_keys(reader.get(ORDERS, {"q": "c"})) == []
    # the next page goes on with the prefix the first page found
    first = reader.get(ORDERS, {"q": "a*", "limit": "1"})
    assert listed_keys(first) == ["order:a1"]
    assert '<span class="xsm-mono" id="xsm-searched">order:a</span>' in first.content.decode()
    second = reader.get(next_link(first))
    assert listed_keys(second) == ["order:a2"] and next_link(second) == ""


def test_search_prefers_keys_that_start_with_the_text_itself(reader: Any) -> None:
    seed_order("a:literal")
    seed_order("order:a1")
    assert listed_keys(reader.get(ORDERS, {"q": "a"})) == ["a:literal"]
    assert listed_keys(reader.get(ORDERS, {"q": "a:literal"})) == ["a:literal"]
    assert listed_keys(reader.get(ORDERS, {"q": "order:"})) == ["order:a1"]


def test_a_record_the_scanner_parked_says_why(reader: Any) -> None:
    from django_xsm.backend import get_store

    seed_ticket("t:parked")
    store = get_store()
    store.client.hset(store.layout.snapshot("t:parked"), "d", b"{not json")
    store.park("t:parked", reason="SnapshotCorruptError: not valid JSON")
    html = reader.get(f"{LIST}instance/", {"key": "t:parked"}).content.decode()
    assert "cannot be read" in html
    assert "The timer scanner parked it" in html and "not valid JSON" in html


@pytest.mark.parametrize("after_seq", ["²", "9" * 5000, "-1", "1e3", "x7"])
def test_a_strange_after_seq_shows_the_newest_page(reader: Any, after_seq: str) -> None:
    seed_ticket("log:odd")
    response = reader.get(f"{LIST}instance/", {"key": "log:odd", "after_seq": after_seq})
    assert response.status_code == 200
    assert 'class="xsm-log-row" data-seq="1"' in response.content.decode()
