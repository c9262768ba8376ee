"""pre_transition / post_transition and the structured transition log."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm import backend as stores
from django_xsm.backend.transitions import JsonFormatter
from django_xsm.registry import machines
from django_xsm.signals import post_transition, pre_transition
from tests.django import views


@pytest.fixture
def received() -> Iterator[dict[str, list[dict[str, Any]]]]:
    got: dict[str, list[dict[str, Any]]] = {"pre": [], "post": []}

    def pre(sender: Any, **kwargs: Any) -> None:
        got["pre"].append({"sender": sender, **kwargs})

    def post(sender: Any, **kwargs: Any) -> None:
        got["post"].append({"sender": sender, **kwargs})

    pre_transition.connect(pre, dispatch_uid="test-pre")
    post_transition.connect(post, dispatch_uid="test-post")
    yield got
    pre_transition.disconnect(dispatch_uid="test-pre")
    post_transition.disconnect(dispatch_uid="test-post")


def lines(caplog: Any) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "django_xsm.transitions"]


def test_signals_of_a_view(client: Any, backend: Any, received: Any):
    client.post("/t/s1/bump", HTTP_IDEMPOTENCY_KEY="k", HTTP_X_REQUEST_ID="req-1")
    [pre] = received["pre"]
    assert pre["sender"] == "ticket"
    assert pre["machine"] == "ticket"
    assert pre["key"] == "ticket:s1"
    assert pre["event"] == "BUMP"
    assert pre["state"] == "open"
    assert pre["actor"] == "anonymous"
    assert pre["correlation_id"] == "req-1"
    assert pre["instance"].key == "ticket:s1"
    [post] = received["post"]
    assert post["from_state"] == "open"
    assert post["to_state"] == "open"
    assert post["version"] == 1
    assert post["seq"] == 1
    assert post["payload"] == {}


def test_post_transition_only_after_a_durable_commit(client: Any, backend: Any, received: Any):
    client.post("/t/s2/racy")
    received["post"].clear()
    views.RACES["s2"] = 1
    assert client.post("/t/s2/racy").status_code == 200
    # the racer's commit (v2) and the retried view's commit (v3); the first,
    # conflicting attempt sent nothing
    assert [(p["actor"], p["version"]) for p in received["post"]] == [
        ("racer", 2),
        ("anonymous", 3),
    ]
    assert len(received["pre"]) == 4  # pre is sent for every attempt


def test_no_signal_for_replays_refusals_or_failures(client: Any, backend: Any, received: Any):
    client.post("/t/s3/bump", HTTP_IDEMPOTENCY_KEY="k")
    client.post("/t/s3/bump", HTTP_IDEMPOTENCY_KEY="k")  # replay
    client.post("/t/s3/close", HTTP_IDEMPOTENCY_KEY="c")  # accepted: count 1
    client.post("/t/s3/close", HTTP_IDEMPOTENCY_KEY="c2")  # refused: 409
    client.raise_request_exception = False
    client.post("/t/s3/boom", HTTP_IDEMPOTENCY_KEY="b")  # 409 first: closed
    assert [p["event"] for p in received["post"]] == ["BUMP", "CLOSE"]


def test_pre_transition_can_refuse_an_event(backend: Any):
    def veto(sender: Any, event: str, **kwargs: Any) -> None:
        if event == "CLOSE":
            raise PermissionError("closing is not allowed today")

    pre_transition.connect(veto, dispatch_uid="veto")
    try:
        objects = machines["ticket"].objects
        objects.send("ticket:v", "BUMP", create=True)
        with pytest.raises(PermissionError):
            objects.send("ticket:v", "CLOSE")
        assert objects.get("ticket:v").value == "open"
        assert objects.get("ticket:v").version == 1
    finally:
        pre_transition.disconnect(dispatch_uid="veto")


def test_a_failing_post_receiver_does_not_fail_the_request(client: Any, backend: Any, caplog: Any):
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("mail server down")

    post_transition.connect(broken, dispatch_uid="broken")
    try:
        response = client.post("/t/s4/bump", HTTP_IDEMPOTENCY_KEY="k")
    finally:
        post_transition.disconnect(dispatch_uid="broken")
    assert response.status_code == 201
    assert machines["ticket"].objects.get("ticket:s4").version == 1
    assert any("mail server down" in str(r.exc_info) for r in caplog.records if r.exc_info)


async def test_async_views_await_post_transition(async_client: Any, backend: Any):
    seen: list[tuple[str, int]] = []

    async def async_receiver(sender: Any, event: str, version: int, **kwargs: Any) -> None:
        seen.append(("async", version))

    def sync_receiver(sender: Any, event: str, version: int, **kwargs: Any) -> None:
        seen.append(("sync", version))

    post_transition.connect(async_receiver, dispatch_uid="a")
    post_transition.connect(sync_receiver, dispatch_uid="s")
    try:
        response = await async_client.post("/t/s5/abump", headers={"Idempotency-Key": "k"})
    finally:
        post_transition.disconnect(dispatch_uid="a")
        post_transition.disconnect(dispatch_uid="s")
    assert response.status_code == 201
    assert sorted(seen) == [("async", 1), ("sync", 1)]


def test_async_view_under_wsgi_sends_post_transition(client: Any, backend: Any, received: Any):
    assert client.post("/t/s6/abump", HTTP_IDEMPOTENCY_KEY="k").status_code == 201
    assert [(p["event"], p["version"]) for p in received["post"]] == [("BUMP", 1)]


def test_timer_fires_are_signalled_and_logged(backend: Any, received: Any, caplog: Any):
    objects = machines["ticket"].objects
    objects.send("ticket:t", "BUMP", create=True)
    due = objects.get("ticket:t").deadlines[0].due_ms
    received["post"].clear()
    with caplog.at_level(logging.INFO, logger="django_xsm.transitions"):
        assert stores.get_scanner().scan(now=due + 1).fired == 1
    [post] = received["post"]
    assert post["to_state"] == "stale"
    assert post["actor"] == "xsm:timer"
    [line] = lines(caplog)
    assert line.xsm["event"] == "xstate.after.60000.ticket.open"  # type: ignore[attr-defined]


# --- log lines ------------------------------------------------------------------------------


def test_one_structured_line_per_transition(client: Any, backend: Any, caplog: Any):
    with caplog.at_level(logging.INFO, logger="django_xsm.transitions"):
        client.post("/t/l1/bump", HTTP_IDEMPOTENCY_KEY="a", HTTP_X_REQUEST_ID="corr-9")
        client.post("/t/l1/close", HTTP_IDEMPOTENCY_KEY="b", HTTP_X_REQUEST_ID="corr-10")
    first, second = lines(caplog)
    assert first.levelno == logging.INFO
    assert first.getMessage() == "ticket ticket:l1: open -> open on BUMP (v1)"
    assert first.xsm == {  # type: ignore[attr-defined]
        "machine": "ticket",
        "key": "ticket:l1",
        "event": "BUMP",
        "from": "open",
        "to": "open",
        "accepted": True,
        "version": 1,
        "seq": 1,
        "actor": "anonymous",
        "correlation_id": "corr-9",
    }
    assert second.getMessage() == "ticket ticket:l1: open -> closed on CLOSE (v2)"
    assert second.xsm["correlation_id"] == "corr-10"  # type: ignore[attr-defined]


def test_strict_refusal_is_logged_not_accepted(client: Any, backend: Any, caplog: Any):
    with caplog.at_level(logging.INFO, logger="django_xsm.transitions"):
        assert client.post("/t/l2/close", HTTP_IDEMPOTENCY_KEY="c").status_code == 409
    [line] = lines(caplog)
    # the line says why (issue: refusals must name the guard that said no)
    assert (
        line.getMessage()
        == "ticket ticket:l2: CLOSE not accepted in open (v0): guard bumped said no"
    )
    assert line.xsm["accepted"] is False  # type: ignore[attr-defined]
    assert line.xsm["reason"] == "guard-refused" and line.xsm["guards"] == ["bumped"]  # type: ignore[attr-defined]
    assert line.xsm["from"] == line.xsm["to"] == "open"  # type: ignore[attr-defined]


def test_lenient_refusal_is_logged_not_accepted(backend: Any, caplog: Any):
    objects = machines["ticket"].objects
    objects.send("ticket:l3", "BUMP", create=True)
    with caplog.at_level(logging.INFO, logger="django_xsm.transitions"):
        assert objects.send("ticket:l3", "REOPEN").accepted is False
    [line] = lines(caplog)
    assert line.xsm["accepted"] is False  # type: ignore[attr-defined]
    assert line.xsm["version"] == 1  # type: ignore[attr-defined]
    assert line.xsm["reason"] in ("no-transition", "guard-refused")  # type: ignore[attr-defined]


def test_audit_off_still_logs_with_seq_zero(client: Any, backend: Any, caplog: Any, xsm: Any):
    xsm(AUDIT={"ENABLED": False})
    with caplog.at_level(logging.INFO, logger="django_xsm.transitions"):
        client.post("/t/l4/bump", HTTP_IDEMPOTENCY_KEY="a")
    [line] = lines(caplog)
    assert line.xsm["seq"] == 0  # type: ignore[attr-defined]
    assert line.xsm["version"] == 1  # type: ignore[attr-defined]
    assert machines["ticket"].objects.history("ticket:l4") == []


def test_json_formatter(client: Any, backend: Any, caplog: Any):
    with caplog.at_level(logging.INFO, logger="django_xsm.transitions"):
        client.post("/t/l5/bump", HTTP_IDEMPOTENCY_KEY="a", HTTP_X_REQUEST_ID="json-1")
    [line] = lines(caplog)
    data = json.loads(JsonFormatter().format(line))
    assert data["logger"] == "django_xsm.transitions"
    assert data["level"] == "INFO"
    assert data["message"] == "ticket ticket:l5: open -> open on BUMP (v1)"
    assert data["key"] == "ticket:l5"
    assert data["correlation_id"] == "json-1"
    assert data["time"].endswith("+00:00")
    plain = logging.LogRecord("x", logging.WARNING, __file__, 1, "hello %s", ("you",), None)
    assert json.loads(JsonFormatter().format(plain))["message"] == "hello you"


async def test_raw_apersisted_with_the_django_plugins_sends_post_transition(
    backend: Any, received: Any
):
    """One rule for every async block opened with the backend's plugins:
    the manager's aopen() and a raw apersisted() both await the signals."""
    from django_xsm import backend as xsm_backend
    from django_xsm.persistence import apersisted

    found = xsm_backend.get_async_backend()
    async with apersisted(
        found.store, "ticket:raw", machines["ticket"].machine, plugins=found.plugins
    ) as block:
        block.send("BUMP")
    [post] = received["post"]
    assert (post["key"], post["event"], post["version"]) == ("ticket:raw", "BUMP", 1)
