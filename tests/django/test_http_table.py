"""Every row of the HTTP table (docs/http.md), for sync and async views, on
fakeredis and on the live server."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from django_xsm.registry import machines
from tests.django import views
from tests.django.conftest import problem

pytestmark = pytest.mark.django_db(transaction=False)

SYNC_ASYNC = ["", "a"]


def post(client: Any, url: str, key: str | None = None, data: Any = None, **headers: str) -> Any:
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(
        url, json.dumps(data or {}), content_type="application/json", headers=headers
    )


def count(tid: str) -> int:
    return machines["ticket"].objects.get(f"ticket:{tid}").context["count"]


# --- 400: the key ---------------------------------------------------------------------


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_missing_required_key_is_400_and_runs_nothing(client: Any, backend: Any, prefix: str):
    response = post(client, f"/t/k1/{prefix}bump")
    assert response.status_code == 400
    body = problem(response)
    assert body["type"].endswith("/problems/idempotency-key")
    assert "Idempotency-Key" in body["detail"]
    assert views.CALLS[f"{prefix}bump"] == 0
    assert not machines["ticket"].objects.exists("ticket:k1")


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
@pytest.mark.parametrize(
    "raw",
    [
        "x" * 256,  # too long
        '"' + "y" * 256 + '"',  # too long once unquoted
        "has space",  # not a token, not quoted
        '"unterminated',
        '"bad \\n escape"',
        '"inner " quote"',
        '""',  # empty
        "tab\tinside",
        "caf\u00e9",  # non-ASCII
    ],
)
def test_malformed_key_is_400(client: Any, backend: Any, prefix: str, raw: str):
    response = client.post(f"/t/k2/{prefix}bump", HTTP_IDEMPOTENCY_KEY=raw)
    assert response.status_code == 400, raw
    assert problem(response)["type"].endswith("/problems/idempotency-key")
    assert views.CALLS[f"{prefix}bump"] == 0


def test_control_characters_in_key_are_400(client: Any, backend: Any):
    response = client.post("/t/k3/bump", HTTP_IDEMPOTENCY_KEY='"a\x01b"')
    assert response.status_code == 400
    response = client.post("/t/k3/bump", HTTP_IDEMPOTENCY_KEY="a\x7fb")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ('"with space"', "with space"),
        ('"esc \\" and \\\\"', 'esc " and \\'),
        ("  padded  ", "padded"),
        ("a" * 255, "a" * 255),
    ],
)
def test_valid_keys_are_accepted_and_unquoted(client: Any, backend: Any, raw: str, key: str):
    response = client.post("/t/k4/bump", HTTP_IDEMPOTENCY_KEY=raw)
    assert response.status_code == 201
    again = client.post("/t/k4/bump", HTTP_IDEMPOTENCY_KEY=json.dumps(key))
    assert again["Idempotent-Replayed"] == "true"  # the same key, quoted this time


def test_optional_key_is_honoured_when_sent(client: Any, backend: Any):
    first = post(client, "/t/k5/optional_key")
    second = post(client, "/t/k5/optional_key")
    assert first.status_code == second.status_code == 200
    assert count("k5") == 2  # no key: each request is new
    keyed = post(client, "/t/k5/optional_key", key="once")
    replay = post(client, "/t/k5/optional_key", key="once")
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == keyed.json()
    assert count("k5") == 3


def test_malformed_optional_key_is_still_400(client: Any, backend: Any):
    response = client.post("/t/k6/optional_key", HTTP_IDEMPOTENCY_KEY="two words")
    assert response.status_code == 400


def test_safe_methods_ignore_the_key(client: Any, backend: Any):
    post(client, "/t/k7/bump", key="a")
    response = client.get("/t/k7/show", HTTP_IDEMPOTENCY_KEY="not a token")
    assert response.status_code == 200


# --- replay ---------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_finished_duplicate_replays_status_type_and_body(client: Any, backend: Any, prefix: str):
    first = post(client, f"/t/r1/{prefix}bump", key="pay-1", data={"n": 1})
    second = post(client, f"/t/r1/{prefix}bump", key="pay-1", data={"n": 1})
    assert first.status_code == second.status_code == 201
    assert "Idempotent-Replayed" not in first
    assert second["Idempotent-Replayed"] == "true"
    assert second["Content-Type"] == first["Content-Type"] == "application/json"
    assert second.content == first.content
    assert views.CALLS[f"{prefix}bump"] == 1
    assert count("r1") == 1
    log = machines["ticket"].objects.history("ticket:r1")
    assert [r.event_type for r in log] == ["BUMP"]
    assert log[0].idempotency_key == "pay-1"


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
async def test_async_client_replays_too(async_client: Any, backend: Any, prefix: str):
    headers = {"Idempotency-Key": "async-1"}
    first = await async_client.post(f"/t/r2/{prefix}bump", {}, headers=headers)
    second = await async_client.post(f"/t/r2/{prefix}bump", {}, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second["Idempotent-Replayed"] == "true"
    assert second.content == first.content
    view = await machines["ticket"].objects.aget("ticket:r2")
    assert view.context["count"] == 1


def test_replay_of_binary_body_and_location(client: Any, backend: Any):
    first = post(client, "/t/r3/binary", key="bin")
    second = post(client, "/t/r3/binary", key="bin")
    assert second.content == bytes(range(256)) == first.content
    assert second["Content-Type"] == "application/octet-stream"
    assert second["Location"] == "/t/r3"


def test_replay_of_oversized_body_keeps_status_but_no_body(client: Any, backend: Any):
    first = post(client, "/t/r4/big", key="big")
    second = post(client, "/t/r4/big", key="big")
    assert first.status_code == second.status_code == 202
    assert len(first.content) == 5000
    assert second.content == b""
    assert second["Idempotent-Replayed"] == "true"
    assert count("r4") == 1


def test_template_response_is_rendered_and_replayed(client: Any, backend: Any):
    first = post(client, "/t/r5/template", key="tpl")
    second = post(client, "/t/r5/template", key="tpl")
    assert first.content.strip() == b"ticket:r5 is open after 1"
    assert second.content == first.content


def test_keys_are_scoped_to_the_instance(client: Any, backend: Any):
    post(client, "/t/s1/bump", key="same")
    other = post(client, "/t/s2/bump", key="same")
    assert "Idempotent-Replayed" not in other
    assert count("s1") == count("s2") == 1


def test_keys_are_scoped_to_the_principal(client: Any, backend: Any, django_user_model: Any):
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    client.force_login(alice)
    post(client, "/t/s3/bump", key="shared")
    client.force_login(bob)
    response = post(client, "/t/s3/bump", key="shared")
    assert "Idempotent-Replayed" not in response  # bob's key is not alice's
    client.force_login(alice)
    assert post(client, "/t/s3/bump", key="shared")["Idempotent-Replayed"] == "true"
    assert count("s3") == 2
    actors = [r.actor for r in machines["ticket"].objects.history("ticket:s3")]
    assert actors == ["alice", "bob"]


def test_a_view_that_commits_nothing_releases_the_key(client: Any, backend: Any):
    first = post(client, "/t/n1/reject", key="retry-me")
    second = post(client, "/t/n1/reject", key="retry-me")
    assert first.status_code == second.status_code == 400
    assert "Idempotent-Replayed" not in second
    assert views.CALLS["reject"] == 2


def test_a_view_that_raises_writes_nothing_and_releases_the_key(client: Any, backend: Any):
    client.raise_request_exception = False
    assert post(client, "/t/n2/fail", key="k").status_code == 500
    assert not machines["ticket"].objects.exists("ticket:n2")
    # The key was released: the same request with the working view runs.
    assert post(client, "/t/n2/bump", key="k").status_code == 201


def test_an_action_that_raises_writes_nothing(client: Any, backend: Any):
    client.raise_request_exception = False
    post(client, "/t/n3/bump", key="a")
    assert post(client, "/t/n3/boom", key="b").status_code == 500
    assert count("n3") == 1
    assert machines["ticket"].objects.get("ticket:n3").version == 1


# --- 422 ------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_same_key_different_payload_is_422(client: Any, backend: Any, prefix: str):
    post(client, f"/t/m1/{prefix}bump", key="k", data={"amount": 1})
    response = post(client, f"/t/m1/{prefix}bump", key="k", data={"amount": 2})
    assert response.status_code == 422
    body = problem(response)
    assert body["type"].endswith("/problems/idempotency-mismatch")
    assert body["idempotency_key"] == "k"
    assert count("m1") == 1


def test_same_key_on_another_endpoint_is_422(client: Any, backend: Any):
    post(client, "/t/m2/bump", key="k")
    assert post(client, "/t/m2/close", key="k").status_code == 422


# --- 409: in flight -------------------------------------------------------------------


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_duplicate_in_flight_is_409_with_retry_after(backend: Any, prefix: str):
    from django.test import Client

    entered, release = views.gate("f1")
    results: dict[str, Any] = {}

    def first() -> None:
        results["first"] = post(Client(), f"/t/f1/{prefix}gated", key="slow")

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert entered.wait(10)
        second = post(Client(), f"/t/f1/{prefix}gated", key="slow")
        assert second.status_code == 409
        assert int(second["Retry-After"]) >= 1
        body = problem(second)
        assert body["type"].endswith("/problems/in-flight")
        assert body["retry_after"] == int(second["Retry-After"])
    finally:
        release.set()
        thread.join(10)
    assert results["first"].status_code == 201
    third = post(Client(), f"/t/f1/{prefix}gated", key="slow")
    assert third["Idempotent-Replayed"] == "true"
    assert views.CALLS[f"{prefix}gated"] == 1
    assert count("f1") == 1


# --- 409: not accepted ------------------------------------------------------------------


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_guard_refused_is_409_and_writes_nothing(client: Any, backend: Any, prefix: str):
    post(client, "/t/g1/optional_key")  # the instance exists, count 1
    machines["ticket"].objects.send("ticket:g1", "CLOSE")  # closed now
    response = post(client, f"/t/g1/{prefix}close", key="c")
    assert response.status_code == 409
    assert "Retry-After" not in response
    body = problem(response)
    assert body["type"].endswith("/problems/event-not-accepted")
    assert body["event"] == "CLOSE"
    assert body["state"] == "closed"
    assert machines["ticket"].objects.get("ticket:g1").version == 2


def test_guard_false_is_409(client: Any, backend: Any):
    response = post(client, "/t/g2/close", key="c")  # count 0: the guard says no
    assert response.status_code == 409
    assert problem(response)["state"] == "open"
    assert not machines["ticket"].objects.exists("ticket:g2")
    # nothing committed: the key is free for the retry after a fix
    post(client, "/t/g2/bump", key="b")
    assert post(client, "/t/g2/close", key="c").status_code == 200


# --- 409: conflicts and locks ---------------------------------------------------------


def test_conflict_is_retried_by_running_the_view_again(client: Any, backend: Any, xsm: Any):
    # optimistic on every attempt: the racer inside the view can still win
    # (with the default lock the re-run holds the lock: test_adaptive_lock)
    xsm(LOCK="optimistic")
    post(client, "/t/c1/racy")
    views.RACES["c1"] = 2  # two racing commits: attempts 1 and 2 conflict, 3 wins
    response = post(client, "/t/c1/racy")
    assert response.status_code == 200
    assert views.CALLS["racy"] == 4
    assert count("c1") == 4  # 1 + 2 racers + 1


def test_async_conflict_is_retried(client: Any, backend: Any):
    post(client, "/t/c2/aracy")
    views.RACES["c2"] = 1
    assert post(client, "/t/c2/aracy").status_code == 200
    assert views.CALLS["aracy"] == 3
    assert count("c2") == 3


def test_conflict_after_retries_is_409_with_retry_after(client: Any, backend: Any):
    post(client, "/t/c3/racy_no_retry")
    views.RACES["c3"] = 1
    response = post(client, "/t/c3/racy_no_retry")
    assert response.status_code == 409
    assert response["Retry-After"] == "1"
    body = problem(response)
    assert body["type"].endswith("/problems/conflict")
    assert body["expected_version"] == 1
    assert body["actual_version"] == 2
    assert count("c3") == 2  # the first request and the racer; ours wrote nothing


def test_conflicts_exhausting_default_retries_is_409(client: Any, backend: Any, xsm: Any):
    xsm(LOCK="optimistic")  # as in test_conflict_is_retried_by_running_the_view_again
    post(client, "/t/c4/racy")
    views.RACES["c4"] = 5  # more than CONFLICT_RETRIES + 1
    response = post(client, "/t/c4/racy")
    assert response.status_code == 409
    assert views.CALLS["racy"] == 1 + 3


@pytest.mark.parametrize("second_view", ["locked", "alocked"])
def test_busy_pessimistic_lock_is_409_with_retry_after(backend: Any, second_view: str):
    from django.test import Client

    post(Client(), "/t/l1/optional_key")
    entered, release = views.gate("l1")
    results: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: results.setdefault("first", post(Client(), "/t/l1/locked"))
    )
    thread.start()
    try:
        assert entered.wait(10)
        second = post(Client(), f"/t/l1/{second_view}")
        assert second.status_code == 409
        assert int(second["Retry-After"]) >= 1
        assert problem(second)["type"].endswith("/problems/locked")
    finally:
        release.set()
        thread.join(10)
    assert results["first"].status_code == 200
    assert count("l1") == 2


# --- 404 ------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_absent_instance_is_404(client: Any, backend: Any, prefix: str):
    response = client.get(f"/t/none/{prefix}show")
    assert response.status_code == 404
    body = problem(response)
    assert body["type"].endswith("/problems/not-found")
    assert body["key"] == "ticket:none"


def test_manager_does_not_exist_is_404_through_the_middleware(client: Any, backend: Any):
    assert problem(client.get("/t/none/manager_get"))["status"] == 404
    assert problem(client.get("/t/none/amanager_get"))["status"] == 404


async def test_async_manager_404_on_asgi(async_client: Any, backend: Any):
    response = await async_client.get("/t/none/amanager_get")
    assert response.status_code == 404


def test_invalid_instance_key_from_the_url_is_400(client: Any, backend: Any):
    response = client.post("/loose/a%0Ab")  # a newline inside the key
    assert response.status_code == 400
    assert problem(response)["type"].endswith("/problems/invalid-key")


# --- 503 ------------------------------------------------------------------------------


@pytest.fixture
def dead_store(xsm: Any) -> None:
    # Nothing listens on port 1: connections are refused at once.
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_store_unavailable_is_503_with_retry_after(client: Any, dead_store: None, prefix: str):
    response = post(client, f"/t/u1/{prefix}bump", key="k")
    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    body = problem(response)
    assert body["type"].endswith("/problems/unavailable")
    text = response.content.decode()
    assert "127.0.0.1" not in text
    assert ":1" not in text.replace(":1,", "")  # no host:port in the detail


def test_readiness_503_and_liveness_200_when_store_down(client: Any, dead_store: None):
    ready = client.get("/_xsm/ready")
    assert ready.status_code == 503
    assert ready["Retry-After"] == "5"
    assert ready.json() == {"status": "unavailable", "reason": "store"}
    assert "127.0.0.1" not in ready.content.decode()
    assert client.get("/_xsm/health").status_code == 200


def test_readiness_503_when_the_namespace_cannot_be_used(
    client: Any, backend: Any, monkeypatch: Any
):
    from django_xsm import backend as stores
    from django_xsm.exceptions import StoreError

    def newer_layout() -> Any:
        raise StoreError("Namespace 'x' uses key layout 9", hint="upgrade")

    monkeypatch.setattr(stores, "get_backend", newer_layout)
    ready = client.get("/_xsm/ready")
    assert ready.status_code == 503 and ready["Retry-After"] == "5"
    assert ready.json() == {"status": "unavailable", "reason": "configuration"}


def test_html_clients_get_plain_text_problems(client: Any, backend: Any):
    response = client.post("/t/h1/bump", HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.startswith(b"Invalid or missing idempotency key: ")


@pytest.mark.parametrize("url", ["/cbv/v1", "/acbv/v1"])
def test_class_based_views_with_method_decorator(client: Any, backend: Any, url: str):
    first = client.post(url, HTTP_IDEMPOTENCY_KEY="k")
    again = client.post(url, HTTP_IDEMPOTENCY_KEY="k")
    assert first.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert client.get("/cbv/v1").json()["count"] == 1
    assert client.get("/cbv/none").status_code == 404


def test_unknown_machine_is_a_logged_500_problem(client: Any, backend: Any, caplog: Any):
    response = client.post("/t/z1/unknown_machine")
    assert response.status_code == 500
    body = problem(response)
    assert body["type"].endswith("/problems/internal")
    assert "nope" not in body["detail"]  # internals stay in the log
    assert any("UnknownMachineError" in r.getMessage() for r in caplog.records)


def test_unknown_machine_with_debug_reaches_the_debug_page(
    client: Any, backend: Any, settings: Any
):
    from django_xsm.exceptions import UnknownMachineError

    settings.DEBUG = True
    with pytest.raises(UnknownMachineError):
        client.post("/t/z1/unknown_machine")


def test_every_problem_type_uri_points_at_a_page_that_exists(client: Any, backend: Any):
    from django_xsm.http import PROBLEM_TYPES, problem_type_uri

    for slug, (status, title, _text) in PROBLEM_TYPES.items():
        uri = problem_type_uri(None, slug)
        page = client.get(uri)
        assert page.status_code == 200, uri
        html = page.content.decode()
        assert title in html and f"HTTP {status}" in html
    assert client.get("/_xsm/problems/nope").status_code == 404
    assert problem_type_uri(None, "bad-request") == "about:blank"  # not one of ours


def test_a_problem_response_links_its_page(client: Any, backend: Any):
    response = client.post("/t/p1/close", HTTP_IDEMPOTENCY_KEY="k")  # not accepted in 'open'
    data = problem(response)
    assert data["type"] == "http://testserver/_xsm/problems/event-not-accepted"
    assert client.get(data["type"]).status_code == 200


def test_a_value_the_store_cannot_keep_is_422_and_writes_nothing(client: Any, backend: Any):
    # json.loads accepts a lone surrogate; no store can keep it exactly
    response = client.post(
        "/t/u1/splat_mapping", data='{"type": "BUMP", "text": "\\ud800"}',
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="u1",
    )  # fmt: skip
    body = problem(response)
    assert response.status_code == 422 and body["type"].endswith("/problems/unstorable-value")
    assert "$." in body["detail"]
    assert not machines["ticket"].objects.exists("ticket:u1")


def test_refused_credentials_are_a_500_without_retry_after(caplog: Any):
    from django.test import RequestFactory

    from django_xsm.exceptions import StoreAuthenticationError
    from django_xsm.http import error_response

    request = RequestFactory().post("/x", HTTP_ACCEPT="application/json")
    with caplog.at_level(logging.ERROR, logger="django_xsm.http"):
        response = error_response(
            StoreAuthenticationError("Redis refused", cause="WRONGPASS"), request
        )
    assert "Redis refused django-xsm's credentials" in caplog.text
    assert response is not None and response.status_code == 500
    assert "Retry-After" not in response
    assert json.loads(response.content)["type"].endswith("store-misconfigured")


def test_readiness_reports_a_namespace_reset(client: Any, backend: Any):
    """Redis lost this namespace's data (its id changed): still ready, but said."""
    assert "namespace_reset" not in client.get("/_xsm/ready").json()
    from django_xsm.redis.keys import KeyLayout

    marker = KeyLayout.schema_key_for(backend.store.prefix)
    assert backend.client.exists(marker), "the namespace marker exists once the store was used"
    backend.client.hset(marker, "id", "another-namespace")
    data = client.get("/_xsm/ready").json()
    assert data["status"] == "ready" and data["namespace_reset"] is True


def test_a_refused_event_says_which_guard_said_no(client: Any, backend: Any):
    body = problem(client.post("/t/g1/close", HTTP_IDEMPOTENCY_KEY="g1"))
    assert (body["reason"], body["guards"]) == ("guard-refused", ["bumped"])
    assert "guard 'bumped' said no" in body["detail"]
    machines["ticket"].objects.send("ticket:g2", "BUMP", create=True)
    machines["ticket"].objects.send("ticket:g2", "CLOSE")
    body = problem(client.post("/t/g2/bump", HTTP_IDEMPOTENCY_KEY="g2"))
    assert body["reason"] in ("no-transition", "done") and "guards" not in body


def test_readiness_reports_the_outbox_backlog(client: Any, backend: Any):
    """The outbox's counts ride on /_xsm/ready (for dashboards and alerts)."""
    from django_xsm.registry import machines

    before = client.get("/_xsm/ready").json()
    assert before["status"] == "ready"
    assert before["outbox"] == {"pending": 0, "retrying": 0, "dead": 0, "lag_ms": 0}
    objects = machines["order"].objects
    objects.send("order:ob1", "ADD_ITEM", create=True, sku="a", qty=1, price_cents=500)
    objects.send("order:ob1", "CHECKOUT")
    objects.send("order:ob1", "PAYMENT_RECEIVED", payment_id="p1", amount_cents=500)  # emits
    after = client.get("/_xsm/ready").json()["outbox"]
    assert after["pending"] == 1 and after["dead"] == 0


# --- hostile bodies (issue 21) ------------------------------------------------------------


def _no_error_logged(caplog: Any) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [(r.name, r.getMessage()[:200]) for r in errors]


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
@pytest.mark.parametrize("body", ["{}", '{"type": null}', '{"type": ""}', '{"type": 42}'])
def test_an_event_without_a_usable_type_is_400_invalid_event(
    client: Any, backend: Any, caplog: Any, prefix: str, body: str
):
    """docs/django.md's instance.send(data) with such a body: a 400, no 500."""
    response = client.post(
        f"/t/ie/{prefix}splat_mapping", data=body, content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="ie",
    )  # fmt: skip
    assert response.status_code == 400
    data = problem(response)
    assert data["type"] == "http://testserver/_xsm/problems/invalid-event"
    assert "non-empty string 'type'" in data["detail"]
    assert not machines["ticket"].objects.exists("ticket:ie")
    _no_error_logged(caplog)


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
@pytest.mark.parametrize("depth", [100, 101, 500])
def test_a_payload_nested_100_levels_or_more_is_422_and_logs_no_error(
    client: Any, backend: Any, caplog: Any, prefix: str, depth: int
):
    nested = "[" * depth + "1" + "]" * depth
    response = client.post(
        f"/t/deep/{prefix}splat_mapping", data='{"type": "BUMP", "d": ' + nested + "}",
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="deep",
    )  # fmt: skip
    assert response.status_code == 422
    data = problem(response)
    assert data["type"].endswith("/problems/unstorable-value")
    assert data["detail"] == "$.payload is nested more than 100 levels deep"
    assert not machines["ticket"].objects.exists("ticket:deep")
    _no_error_logged(caplog)


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_a_body_over_django_upload_limit_is_413_not_an_html_400(
    client: Any, backend: Any, caplog: Any, prefix: str
):
    """Django refuses to read a 5 MB body (DATA_UPLOAD_MAX_MEMORY_SIZE) when
    the request's fingerprint is taken: a 413 problem, not Django's HTML
    400 with an ERROR from its security logger."""
    response = client.post(
        f"/t/big5/{prefix}splat_mapping", data=json.dumps({"type": "BUMP", "t": "a" * 5_000_000}),
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="five-mb",
    )  # fmt: skip
    assert response.status_code == 413
    data = problem(response)
    assert data["type"].endswith("/problems/payload-too-large")
    assert data["max_bytes"] == 2_621_440 and "2621440 bytes" in data["detail"]
    assert not machines["ticket"].objects.exists("ticket:big5")
    _no_error_logged(caplog)


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_a_body_the_view_reads_over_the_limit_is_413(
    client: Any, backend: Any, caplog: Any, settings: Any, prefix: str
):
    """No Idempotency-Key to fingerprint: the view's own request.body is
    where Django refuses it; the block it ran in writes nothing."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    settings.XSM = {**settings.XSM, "IDEMPOTENCY": {"REQUIRED": []}}
    response = client.post(
        f"/t/big6/{prefix}splat_mapping", data=json.dumps({"type": "BUMP", "t": "a" * 2000}),
        content_type="application/json",
    )  # fmt: skip
    assert response.status_code == 413 and problem(response)["max_bytes"] == 1000
    assert not machines["ticket"].objects.exists("ticket:big6")
    _no_error_logged(caplog)


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_a_payload_over_max_payload_bytes_is_413_and_never_logged(
    client: Any, backend: Any, xsm: Any, caplog: Any, prefix: str
):
    """A 2 MB anonymous payload used to be stored verbatim in the log."""
    response = client.post(
        f"/t/pl/{prefix}splat_mapping", data=json.dumps({"type": "BUMP", "t": "a" * 2_000_000}),
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="pl",
    )  # fmt: skip
    assert response.status_code == 413
    data = problem(response)
    assert data["max_bytes"] == 65536 and data["event"] == "BUMP"
    assert "2000008 bytes, over the limit of 65536" in data["detail"]
    assert not machines["ticket"].objects.exists("ticket:pl")
    _no_error_logged(caplog)
    xsm(MAX_PAYLOAD_BYTES=3_000_000)  # a deployment that accepts it
    response = client.post(
        f"/t/pl/{prefix}splat_mapping", data=json.dumps({"type": "BUMP", "t": "a" * 2_000_000}),
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="pl",
    )  # fmt: skip
    assert response.status_code == 200
    [record] = machines["ticket"].objects.history("ticket:pl")
    assert len(record.payload["t"]) == 2_000_000


@pytest.mark.parametrize("prefix", SYNC_ASYNC)
def test_a_new_snapshot_over_the_limit_is_422_snapshot_too_large(
    client: Any, backend: Any, xsm: Any, caplog: Any, prefix: str
):
    """What the request's events made of the instance is the client's input:
    a 422 (the request may be small; retrying it cannot help), not a 500."""
    xsm(MAX_SNAPSHOT_BYTES=50)
    response = post(client, f"/t/st/{prefix}bump", key="st")
    assert response.status_code == 422
    data = problem(response)
    assert data["type"].endswith("/problems/snapshot-too-large")
    assert "over the limit of 50 bytes" in data["detail"]
    assert not machines["ticket"].objects.exists("ticket:st")
    _no_error_logged(caplog)


def test_a_stored_snapshot_over_the_limit_is_still_a_logged_500(
    client: Any, backend: Any, caplog: Any
):
    """A record written under a larger limit is the operator's to fix."""
    assert post(client, "/t/st2/bump", key="st2a").status_code == 201
    backend.store.max_snapshot_bytes = 50  # as if the setting were lowered since
    response = post(client, "/t/st2/bump", key="st2b")
    assert response.status_code == 500
    assert problem(response)["type"].endswith("/problems/internal")
    assert any("SnapshotTooLargeError" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("path", ["/_xsm/health", "/_xsm/ready", "/_xsm/problems/internal"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_django_xsm_urls_never_read_a_5_mb_body(
    client: Any, backend: Any, caplog: Any, path: str, method: str
):
    """Health, readiness and the problem pages read no body: a 5 MB one is
    never Django's HTML 400 there (GET answers as usual, POST is a 405)."""
    response = client.generic(
        method, path, data="a" * 5_000_000, content_type="application/octet-stream"
    )
    assert response.status_code == (200 if method == "GET" else 405)
    _no_error_logged(caplog)
