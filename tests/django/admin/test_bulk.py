"""Bulk sends of the XSM browser: instances checked on a machine's list
page, one event, a preview (who accepts, who refuses and why), then a
confirmation sent once per instance under its idempotency key, with
per-row results and a ``LogEntry`` per changed instance."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages

from django_xsm.admin.bulk import UNAVAILABLE
from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, post_with_csrf, seed_ticket

BULK = f"{ADMIN}bulk/"
DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


@pytest.fixture
def operator(client_for: Any) -> Any:
    return client_for("olga", "view_instance", "send_event")


def hidden(html: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return found.group(1)


def count(html: str, outcome: str) -> int:
    found = re.search(rf'id="xsm-count-{outcome}">(\d+)<', html)
    assert found is not None, outcome
    return int(found.group(1))


def outcomes(html: str) -> dict[str, str]:
    """The results table: key -> outcome class."""
    table = html.split('id="xsm-bulk-rows"', 1)[1]
    rows = re.findall(
        r'<tr class="xsm-bulk-(\w+)">\s*<td[^>]*>(?:<a[^>]*>|<span[^>]*>)([^<]+)<', table
    )
    return {key: outcome for outcome, key in rows}


def preview(client: Any, event: str, *keys: str, machine: str = "ticket") -> Any:
    data = {"step": "preview", "event": event, "machine": machine, "sel": list(keys)}
    return post_with_csrf(client, BULK, data)


def confirm_data(html: str, event: str, *keys: str, machine: str = "ticket") -> dict[str, Any]:
    """What the preview's confirmation form posts."""
    return {
        "step": "apply",
        "event": event,
        "machine": machine,
        "sel": list(keys),
        "token": hidden(html, "token"),
    }


def version(key: str, machine: str = "ticket") -> int:
    return machines[machine].objects.get(key).version


def test_the_list_page_offers_checkboxes_and_the_machines_events(
    backend: Any, operator: Any
) -> None:
    seed_ticket("l:1")
    html = operator.get(f"{ADMIN}m/ticket/").content.decode()
    assert '<input type="checkbox" name="sel" value="ticket:l:1"' in html
    options = re.findall(r'<option value="([^"]+)">', html.split('id="xsm-bulk-event"')[1])
    assert options[:4] == ["BUMP", "CLOSE", "BOOM", "REOPEN"]
    assert not any(o.startswith(("xstate.", "xsm.")) for o in options)


def test_a_viewer_without_send_permission_gets_no_checkboxes_and_a_403(
    backend: Any, client_for: Any
) -> None:
    seed_ticket("v:1")
    viewer = client_for("vic", "view_instance")
    html = viewer.get(f"{ADMIN}m/ticket/").content.decode()
    assert 'name="sel"' not in html and "xsm-bulk-form" not in html
    assert preview(viewer, "BUMP", "ticket:v:1").status_code == 403
    assert version("v:1") == 1


def test_the_preview_counts_who_accepts_and_who_refuses_and_why(
    backend: Any, operator: Any
) -> None:
    seed_ticket("p:1", bumps=1)
    seed_ticket("p:2", bumps=2)
    seed_ticket("p:3", count=-1)  # count 0: CLOSE's guard wants count > 0
    response = preview(operator, "CLOSE", "ticket:p:1", "ticket:p:2", "ticket:p:3")
    html = response.content.decode()
    assert response.status_code == 200
    assert (count(html, "accept"), count(html, "refuse"), count(html, "error")) == (2, 1, 0)
    assert "guard" in html.split('id="xsm-bulk-reasons"')[1] and "bumped" in html
    assert outcomes(html) == {"p:1": "accept", "p:2": "accept", "p:3": "refuse"}
    assert re.fullmatch(r"[0-9a-f]{32}", hidden(html, "token"))
    # nothing was sent
    assert [version(k) for k in ("p:1", "p:2", "p:3")] == [1, 1, 1]


def test_the_confirmation_sends_once_even_when_submitted_twice(backend: Any, operator: Any) -> None:
    seed_ticket("d:1")
    seed_ticket("d:2")
    seed_ticket("d:3", count=-1)
    keys = ("ticket:d:1", "ticket:d:2", "ticket:d:3")
    html = preview(operator, "CLOSE", *keys).content.decode()
    data = confirm_data(html, "CLOSE", *keys)
    first = post_with_csrf(operator, BULK, data)
    html = first.content.decode()
    assert first.status_code == 200
    assert (count(html, "sent"), count(html, "refuse"), count(html, "error")) == (2, 1, 0)
    assert outcomes(html) == {"d:1": "sent", "d:2": "sent", "d:3": "refuse"}
    assert machines["ticket"].objects.get("d:1").value == "closed"
    versions = [version("d:1"), version("d:2")]
    entries = LogEntry.objects.filter(action_flag=CHANGE).order_by("object_id")
    assert [e.object_id for e in entries] == ["ticket:d:1", "ticket:d:2"]
    assert all(e.change_message.startswith("Sent CLOSE (bulk send") for e in entries)
    # the same confirmation again: replayed, nothing applied twice
    again = post_with_csrf(operator, BULK, data).content.decode()
    assert (count(again, "sent"), count(again, "duplicate")) == (0, 2)
    assert outcomes(again) == {"d:1": "duplicate", "d:2": "duplicate", "d:3": "refuse"}
    assert [version("d:1"), version("d:2")] == versions
    assert LogEntry.objects.filter(action_flag=CHANGE).count() == 2
    history = machines["ticket"].objects.history("d:1")
    assert [r.event_type for r in history].count("CLOSE") == 1
    assert history[-1].actor == "olga" and history[-1].reason == "admin bulk send"


def test_an_action_that_raises_is_an_error_row_and_the_others_are_sent(
    backend: Any, operator: Any
) -> None:
    seed_ticket("b:1")
    html = preview(operator, "BOOM", "ticket:b:1").content.decode()
    assert count(html, "accept") == 1
    result = post_with_csrf(operator, BULK, confirm_data(html, "BOOM", "ticket:b:1"))
    text = result.content.decode()
    assert (count(text, "sent"), count(text, "error")) == (0, 1)
    assert "RuntimeError: boom; nothing was saved." in text
    assert version("b:1") == 1 and not LogEntry.objects.exists()


def test_instances_forgotten_between_preview_and_confirm_are_error_rows(
    backend: Any, operator: Any
) -> None:
    seed_ticket("g:1")
    seed_ticket("g:2")
    keys = ("ticket:g:1", "ticket:g:2", "nosuch:x")
    html = preview(operator, "BUMP", *keys).content.decode()
    assert (count(html, "accept"), count(html, "error")) == (2, 1)
    assert "No machine named &#x27;nosuch&#x27; is registered." in html
    machines["ticket"].objects.forget("g:2")
    text = post_with_csrf(operator, BULK, confirm_data(html, "BUMP", *keys)).content.decode()
    assert outcomes(text) == {"g:1": "sent", "g:2": "error", "x": "error"}
    assert "It is no longer stored (forgotten)." in text
    assert not machines["ticket"].objects.exists("g:2")  # not created by the send


def test_a_selection_spanning_machines_is_offered_only_their_common_events(
    backend: Any, operator: Any
) -> None:
    seed_ticket("s:1")
    machines["desk"].objects.send("desk:s", "ASSIGN", create=True, actor="seed")
    keys = ("ticket:s:1", "desk:desk:s")
    response = preview(operator, "BUMP", *keys)  # desk has no BUMP
    html = response.content.decode()
    assert response.status_code == 400
    assert "is not an event you may send to every selected instance" in html
    assert re.findall(r'<option value="([^"]+)"', html) == ["CLOSE"]
    assert version("s:1") == 1
    # CLOSE is known to both: previewed per machine
    html = preview(operator, "CLOSE", *keys).content.decode()
    assert outcomes(html) == {"s:1": "accept", "desk:s": "accept"}
    done = post_with_csrf(operator, BULK, confirm_data(html, "CLOSE", *keys)).content.decode()
    assert count(done, "sent") == 2
    assert machines["desk"].objects.get("desk:s").value == "closed"
    logged = sorted(LogEntry.objects.values_list("object_id", flat=True))
    assert logged == ["desk:desk:s", "ticket:s:1"]


def test_reserved_events_are_never_offered_nor_sent(backend: Any, operator: Any) -> None:
    seed_ticket("r:1")
    response = preview(operator, "xsm.outbox.failed", "ticket:r:1")
    assert response.status_code == 400
    assert "xsm.outbox.failed" not in re.findall(
        r'<option value="([^"]+)"', response.content.decode()
    )
    html = preview(operator, "BUMP", "ticket:r:1").content.decode()
    forged = {**confirm_data(html, "BUMP", "ticket:r:1"), "event": "xsm.outbox.failed"}
    assert post_with_csrf(operator, BULK, forged).status_code == 400
    assert version("r:1") == 1


def test_the_events_permission_is_checked(backend: Any, operator: Any, client_for: Any) -> None:
    with machines["shop"].objects.open("shop:p1", actor="seed") as order:
        order.send("PAY_ANYWAY")
    html = preview(operator, "REFUND", "shop:shop:p1", machine="shop").content.decode()
    assert "REFUND" not in re.findall(r'<option value="([^"]+)"', html)
    refunder = client_for("rita", "view_instance", "send_event")
    _grant("rita", "fieldapp", "refund_order")
    html = preview(refunder, "REFUND", "shop:shop:p1", machine="shop").content.decode()
    assert count(html, "accept") == 1
    # a forged confirmation of the operator (no REFUND permission) sends nothing
    forged = confirm_data(html, "REFUND", "shop:shop:p1", machine="shop")
    assert post_with_csrf(operator, BULK, forged).status_code == 400
    assert machines["shop"].objects.get("shop:p1").value == "paid"
    done = post_with_csrf(refunder, BULK, forged).content.decode()
    assert count(done, "sent") == 1
    assert machines["shop"].objects.get("shop:p1").value == "refunded"


def _grant(username: str, app_label: str, codename: str) -> None:
    User.objects.get(username=username).user_permissions.add(
        Permission.objects.get(content_type__app_label=app_label, codename=codename)
    )


def test_past_the_bound_nothing_is_sent_and_the_message_says_why(
    xsm: Any, backend: Any, operator: Any
) -> None:
    xsm(ADMIN={"BULK_MAX": 2})
    for n in range(3):
        seed_ticket(f"m:{n}")
    response = preview(operator, "BUMP", "ticket:m:0", "ticket:m:1", "ticket:m:2")
    assert response.status_code == 302 and response["Location"] == f"{ADMIN}m/ticket/"
    assert notes(response) == [
        "3 instances are selected; a bulk send acts on at most 2 "
        "(XSM['ADMIN']['BULK_MAX']). Select fewer. Nothing was sent."
    ]
    # a forged confirmation past the bound is refused the same way
    forged = {"step": "apply", "event": "BUMP", "machine": "ticket", "token": "0" * 32,
              "sel": ["ticket:m:0", "ticket:m:1", "ticket:m:2"]}  # fmt: skip
    assert post_with_csrf(operator, BULK, forged).status_code == 302
    assert [version(f"m:{n}") for n in range(3)] == [1, 1, 1]
    assert preview(operator, "BUMP", "ticket:m:0", "ticket:m:1").status_code == 200
    # nothing selected
    empty = preview(operator, "BUMP")
    assert notes(empty) == ["Select at least one of the instances first. Nothing was sent."]


def notes(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_redis_down_at_preview_is_an_admin_message(backend: Any, operator: Any, xsm: Any) -> None:
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = preview(operator, "BUMP", "ticket:x:1")
    assert response.status_code == 302
    assert notes(response) == [UNAVAILABLE]


def test_redis_down_at_confirm_reports_every_row_unsent(
    backend: Any, operator: Any, xsm: Any
) -> None:
    seed_ticket("u:1")
    seed_ticket("u:2")
    keys = ("ticket:u:1", "ticket:u:2")
    html = preview(operator, "BUMP", *keys).content.decode()
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = post_with_csrf(operator, BULK, confirm_data(html, "BUMP", *keys))
    text = response.content.decode()
    assert response.status_code == 200
    assert outcomes(text) == {"u:1": "error", "u:2": "error"}
    assert text.count("Not sent: the state store is unavailable.") == 2
    assert notes(response) == [UNAVAILABLE]
    assert not LogEntry.objects.exists()


def test_the_confirmation_needs_the_csrf_token(backend: Any, operator: Any) -> None:
    seed_ticket("c:1")
    html = preview(operator, "BUMP", "ticket:c:1").content.decode()
    response = operator.post(BULK, confirm_data(html, "BUMP", "ticket:c:1"))  # no token
    assert response.status_code == 403
    assert version("c:1") == 1


def test_a_get_is_refused(backend: Any, operator: Any) -> None:
    assert operator.get(BULK).status_code == 405
