"""The write actions: send (preview, then apply), fire timers, forget.

Each is recorded in the transition log with the admin user as actor
(forget erases the log, so it is recorded in the admin history instead).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry

from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, post_with_csrf, seed_ticket

KEY = "act:1"
DETAIL = f"{ADMIN}m/ticket/instance/?key=act%3A1"
SEND = f"{ADMIN}m/ticket/send/?key={KEY}"
FIRE = f"{ADMIN}m/ticket/fire/?key={KEY}"
FORGET = f"{ADMIN}m/ticket/forget/?key={KEY}"


@pytest.fixture
def seeded(backend: Any) -> Any:
    seed_ticket(KEY)
    return backend


@pytest.fixture
def operator(client_for: Any) -> Any:
    return client_for("olga", "view_instance", "send_event", "fire_timers", "forget_instance")


def state() -> tuple[Any, int, int]:
    view = machines["ticket"].objects.get(KEY)
    return view.value, view.version, len(machines["ticket"].objects.history(KEY))


def hidden(html: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return found.group(1).replace("&quot;", '"').replace("&amp;", "&")


# --- send ------------------------------------------------------------------------


def test_send_form_lists_the_machine_events(seeded: Any, operator: Any) -> None:
    html = operator.get(SEND + "&event=CLOSE").content.decode()
    assert 'value="CLOSE"' in html
    assert '<option value="REOPEN">' in html
    assert "xstate.after" not in html


def test_preview_shows_the_effect_and_changes_nothing(seeded: Any, operator: Any) -> None:
    before = state()
    response = post_with_csrf(
        operator, SEND, {"event": "CLOSE", "payload": '{"note": "done"}', "step": "preview"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert '<span id="xsm-before">open</span> → <span id="xsm-after">closed</span>' in html
    assert "CLOSE → closed [bumped]" in html
    assert 'id="xsm-apply"' in html
    assert hidden(html, "version") == "1"
    assert json.loads(hidden(html, "payload")) == {"note": "done"}
    assert state() == before
    assert not LogEntry.objects.exists()


def test_preview_lists_the_actions_that_would_run(seeded: Any, operator: Any) -> None:
    html = post_with_csrf(
        operator, SEND, {"event": "BUMP", "payload": "{}", "step": "preview"}
    ).content.decode()
    effect = html[html.index('id="xsm-effect"') :]
    assert "Actions to run" in effect and "bump" in effect


def test_apply_sends_as_the_admin_user_and_logs_it(seeded: Any, operator: Any) -> None:
    data = {
        "event": "CLOSE",
        "payload": '{"note": "done"}',
        "reason": "customer asked",
        "step": "apply",
        "version": "1",
    }
    response = post_with_csrf(operator, SEND, data)
    assert response.status_code == 302
    assert response["Location"] == DETAIL
    value, version, _ = state()
    assert (value, version) == ("closed", 2)
    record = machines["ticket"].objects.latest(KEY, 1)[0]
    assert (record.actor, record.event_type, record.reason) == ("olga", "CLOSE", "customer asked")
    assert record.payload == {"note": "done"}
    assert (record.from_state, record.to_state) == ("open", "closed")
    assert record.correlation_id  # the request's correlation id
    entry = LogEntry.objects.get()
    assert entry.action_flag == CHANGE and entry.object_id == f"ticket:{KEY}"
    assert entry.user.username == "olga"
    assert "Sent CLOSE: open → closed" in entry.change_message
    page = operator.get(DETAIL).content.decode()
    assert "Sent CLOSE: open → closed." in page  # the admin's success message
    assert '<td class="xsm-actor">olga</td>' in page


def test_a_refused_event_shows_a_clear_message(seeded: Any, operator: Any) -> None:
    before = state()
    preview = post_with_csrf(operator, SEND, {"event": "REOPEN", "step": "preview"})
    html = preview.content.decode()
    assert 'id="xsm-refused"' in html
    assert "Refused: Event &#x27;REOPEN&#x27; was not accepted in state &#x27;open&#x27;" in html
    assert "the current state has no transition for it" in html
    assert 'id="xsm-apply"' not in html
    applied = post_with_csrf(operator, SEND, {"event": "REOPEN", "step": "apply", "version": "1"})
    assert applied.status_code == 409
    assert b"Refused: Event &#x27;REOPEN&#x27; was not accepted in state &#x27;open&#x27;" in (
        applied.content
    )
    assert state() == before
    assert not LogEntry.objects.exists()


def test_apply_refuses_when_the_instance_changed_since_the_preview(
    seeded: Any, operator: Any
) -> None:
    machines["ticket"].objects.send(KEY, "BUMP")  # version 2 now
    before = state()
    response = post_with_csrf(operator, SEND, {"event": "CLOSE", "step": "apply", "version": "1"})
    assert response.status_code == 409
    assert b"changed since the preview" in response.content
    assert state() == before


def test_an_action_that_raises_saves_nothing(seeded: Any, operator: Any) -> None:
    before = state()
    response = post_with_csrf(operator, SEND, {"event": "BOOM", "step": "apply", "version": "1"})
    assert response.status_code == 500
    assert b"BOOM failed and nothing was saved: RuntimeError: boom" in response.content
    assert b"Traceback" not in response.content
    assert state() == before


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"event": "", "payload": "{}"}, b"This field is required"),
        ({"event": "xstate.after.60000.ticket.open"}, b"use \xe2\x80\x9cFire timers now"),
        ({"event": "BUMP", "payload": "[1]"}, b"must be a JSON object"),
        ({"event": "BUMP", "payload": "{oops"}, b"Not valid JSON"),
        ({"event": "BUMP", "payload": '{"type": "X"}'}, b"may not hold"),
        ({"event": "BUMP", "payload": "[" * 5000 + "]" * 5000}, b"nested too deeply"),
    ],
)
def test_send_validates_the_form(seeded: Any, operator: Any, data: Any, message: bytes) -> None:
    response = post_with_csrf(operator, SEND, {**data, "step": "apply", "version": "1"})
    assert response.status_code == 400
    assert message in response.content
    assert state()[1] == 1


def test_send_to_a_missing_instance_is_404(seeded: Any, operator: Any) -> None:
    assert operator.get(f"{ADMIN}m/ticket/send/?key=ghost").status_code == 404


# --- fire timers --------------------------------------------------------------------


def test_fire_without_force_fires_nothing_not_yet_due(seeded: Any, operator: Any) -> None:
    before = state()
    response = post_with_csrf(operator, FIRE)
    assert response.status_code == 302
    assert state() == before
    entry = LogEntry.objects.get()
    assert "0 fired, nothing due" in entry.change_message


def test_fire_now_with_force_fires_as_the_admin_user(seeded: Any, operator: Any) -> None:
    response = post_with_csrf(operator, FIRE, {"force": "1"})
    assert response.status_code == 302 and response["Location"] == DETAIL
    value, version, _ = state()
    assert (value, version) == ("stale", 2)
    record = machines["ticket"].objects.latest(KEY, 1)[0]
    assert record.event_type == "xstate.after.60000.ticket.open"
    assert record.actor == "olga"
    assert (record.from_state, record.to_state) == ("open", "stale")
    assert "1 fired" in LogEntry.objects.get().change_message


# --- forget ------------------------------------------------------------------------------


def test_forget_asks_for_confirmation_first(seeded: Any, operator: Any) -> None:
    response = operator.get(FORGET)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="xsm-forget-confirm"' in html and "cannot be recovered" in html
    assert state()[1] == 1


def test_forget_erases_the_instance_and_its_log_and_keeps_admin_history(
    seeded: Any, operator: Any
) -> None:
    response = post_with_csrf(operator, FORGET)
    assert response.status_code == 302
    assert response["Location"] == f"{ADMIN}m/ticket/"
    assert not machines["ticket"].objects.exists(KEY)
    assert machines["ticket"].objects.history(KEY) == []
    entry = LogEntry.objects.get()
    assert entry.action_flag == DELETION and entry.user.username == "olga"
    assert entry.object_id == f"ticket:{KEY}"
    assert "Forgot act:1 (state open, version 1)" in entry.change_message
    assert operator.get(DETAIL).status_code == 404
    # the admin index's "Recent actions" shows it
    assert b"ticket act:1" in operator.get("/admin/").content


def test_forget_of_a_missing_instance_is_404(seeded: Any, operator: Any) -> None:
    response = post_with_csrf(operator, f"{ADMIN}m/ticket/forget/?key=ghost")
    assert response.status_code == 404
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("action", ["send", "fire", "forget"])
def test_actions_refuse_an_invalid_key_with_400(seeded: Any, operator: Any, action: str) -> None:
    response = post_with_csrf(operator, f"{ADMIN}m/ticket/{action}/?key=", {"event": "BUMP"})
    assert response.status_code == 400
    assert not LogEntry.objects.exists()


def test_preview_shows_the_deadlines_the_event_would_arm(seeded: Any, operator: Any) -> None:
    machines["ticket"].objects.send(KEY, "CLOSE")
    html = post_with_csrf(operator, SEND, {"event": "REOPEN", "step": "preview"}).content.decode()
    effect = html[html.index('id="xsm-effect"') :]
    assert re.search(r"xstate\.after\.60000\.ticket\.open \(due \d{4}-\d\d-\d\d ", effect)
    assert state()[0] == "closed"


# --- a finished instance ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, data",
    [
        (SEND, {"event": "REOPEN", "step": "preview"}),
        (SEND, {"event": "REOPEN", "step": "apply", "version": "3"}),
        (FIRE, {"force": "1"}),
    ],
)
def test_actions_refuse_a_finished_instance_with_a_message(
    backend: Any, operator: Any, url: str, data: dict[str, str]
) -> None:
    # the ticket chart has no final state: a cancelled order is finished
    order_url = url.replace("m/ticket/", "m/order/").replace(KEY, "order:done")
    with machines["order"].objects.open("order:done", actor="seed") as order:
        order.send("CANCEL")
    before = machines["order"].objects.get("order:done")
    response = post_with_csrf(operator, order_url, data)
    assert response.status_code == 302
    assert response["Location"] == f"{ADMIN}m/order/instance/?key=order%3Adone"
    page = operator.get(response["Location"]).content.decode()
    assert "order:done is finished (status done)" in page
    after = machines["order"].objects.get("order:done")
    assert (after.version, after.value) == (before.version, before.value)
    assert not LogEntry.objects.exists()
    if url == SEND:  # the form itself is not offered either
        assert operator.get(order_url).status_code == 302


@pytest.mark.parametrize("depth", [120, 5000])
def test_parse_payload_refuses_deep_nesting_on_every_python(depth: int) -> None:
    """3.13's json parser reads what 3.11 and 3.12 refuse with RecursionError:
    the form caps the depth itself (the engine's MAX_DATA_DEPTH)."""
    from django import forms

    from django_xsm.admin.actions import parse_payload

    text = '{"a": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(forms.ValidationError, match="nested too deeply"):
        parse_payload(text)
    shallow = parse_payload('{"a": ' + "[" * 50 + "]" * 50 + "}")  # within the cap
    assert list(shallow) == ["a"]


def test_a_guarded_refusal_names_the_guard_as_the_api_does() -> None:
    from django_xsm.admin.actions import preview_effect
    from django_xsm.exceptions import EventNotAcceptedError
    from tests.django.machines import ticket

    snapshot = ticket.start().snapshot()  # count 0: guard "bumped" says no to CLOSE
    effect = preview_effect(ticket, snapshot, "CLOSE", {})
    assert not effect["accepted"]
    said = "Event 'CLOSE' was not accepted in state 'open': guard 'bumped' said no"
    assert effect["refusal"] == said
    with pytest.raises(EventNotAcceptedError) as raised:
        ticket.start().send("CLOSE", strict=True)
    assert raised.value.message == effect["refusal"]


@pytest.mark.parametrize("version", ["²", "٣", "9" * 5000, "-1", ""])
def test_a_forged_version_is_refused_and_changes_nothing(
    seeded: Any, operator: Any, version: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = state()
    response = post_with_csrf(
        operator, SEND, {"event": "CLOSE", "step": "apply", "version": version}
    )
    assert response.status_code in (400, 409)
    assert state() == before
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
