"""XsmMiddleware and request.xsm: key, actor, principal, correlation id."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from django_xsm.exceptions import IdempotencyKeyError
from django_xsm.middleware import (
    RequestInfo,
    XsmMiddleware,
    get_request_info,
    parse_idempotency_key,
)
from django_xsm.registry import machines
from tests.django.conftest import problem

HEX32 = re.compile(r"^[0-9a-f]{32}$")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def actor_from_header(request: Any) -> str:
    return str(request.headers.get("X-Actor", "nobody"))


def tenant_from_header(request: Any) -> str:
    return "tenant:" + str(request.headers.get("X-Tenant", "none"))


def not_a_string(request: Any) -> Any:
    return 42


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (f"00-{TRACE}-00f067aa0ba902b7-01", TRACE),
        (f"00-{TRACE.upper()}-00F067AA0BA902B7-01", TRACE),  # case-folded
        (f"01-{TRACE}-00f067aa0ba902b7-01-extra", TRACE),  # future versions may extend
    ],
)
def test_traceparent_gives_the_trace_id(client: Any, header: str, expected: str):
    response = client.get("/plain", HTTP_TRACEPARENT=header)
    assert response.json()["correlation_id"] == expected
    assert response["X-Request-ID"] == expected


@pytest.mark.parametrize(
    "header",
    [
        f"ff-{TRACE}-00f067aa0ba902b7-01",  # version ff is invalid
        f"00-{'0' * 32}-00f067aa0ba902b7-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"00-{TRACE}-00f067aa0ba902b7-01-extra",  # version 00 has no extra fields
        f"00-{TRACE[:-1]}-00f067aa0ba902b7-01",  # short
        "garbage",
    ],
)
def test_invalid_traceparent_falls_back(client: Any, header: str):
    response = client.get("/plain", HTTP_TRACEPARENT=header, HTTP_X_REQUEST_ID="req-42")
    assert response.json()["correlation_id"] == "req-42"


@pytest.mark.parametrize("value", ["abc-123", "req_1:2/3+4=5@x", "a" * 128, "01HZX3J5K9"])
def test_valid_request_id_is_used(client: Any, value: str):
    response = client.get("/plain", HTTP_X_REQUEST_ID=value)
    assert response.json()["correlation_id"] == value
    assert response["X-Request-ID"] == value


@pytest.mark.parametrize(
    "value",
    [
        "evil\r\nSet-Cookie: x=1",
        "a" * 129,
        "with space",
        "<script>alert(1)</script>",
        "caf\u00e9",
        "tab\there",
        "",
        "x\x00y",
    ],
)
def test_hostile_request_ids_are_replaced(client: Any, value: str):
    response = client.get("/plain", HTTP_X_REQUEST_ID=value)
    correlation = response.json()["correlation_id"]
    assert HEX32.match(correlation), correlation
    assert response["X-Request-ID"] == correlation


def test_hostile_request_id_never_reaches_the_transition_log(client: Any, backend: Any):
    client.post("/t/x1/bump", HTTP_IDEMPOTENCY_KEY="k", HTTP_X_REQUEST_ID="bad\nvalue")
    [record] = machines["ticket"].objects.history("ticket:x1")
    assert HEX32.match(record.correlation_id)


def test_correlation_id_reaches_the_transition_log(client: Any, backend: Any):
    client.post("/t/x2/bump", HTTP_IDEMPOTENCY_KEY="k", HTTP_X_REQUEST_ID="trace-me")
    [record] = machines["ticket"].objects.history("ticket:x2")
    assert record.correlation_id == "trace-me"


def test_request_id_header_can_be_renamed_or_disabled(client: Any, xsm: Any):
    xsm(REQUEST_ID_HEADER="X-Correlation-ID")
    response = client.get("/plain", HTTP_X_CORRELATION_ID="corr-1", HTTP_X_REQUEST_ID="req-1")
    assert response.json()["correlation_id"] == "corr-1"
    assert response["X-Correlation-ID"] == "corr-1"
    assert "X-Request-ID" not in response
    xsm(REQUEST_ID_HEADER=None)
    response = client.get("/plain", HTTP_X_REQUEST_ID="req-1")
    assert HEX32.match(response.json()["correlation_id"])
    assert "X-Request-ID" not in response


def test_idempotency_key_parsed_into_request_xsm(client: Any):
    data = client.get("/plain", HTTP_IDEMPOTENCY_KEY='"quoted key"').json()
    assert data["idempotency_key"] == "quoted key"
    data = client.get("/plain", HTTP_IDEMPOTENCY_KEY="bad key").json()
    assert data["idempotency_key"] is None
    assert "neither a token nor a quoted string" in data["error"]


def test_custom_idempotency_header(client: Any, backend: Any, xsm: Any):
    xsm(IDEMPOTENCY={"HEADER": "X-Request-Key"})
    first = client.post("/t/x3/bump", HTTP_X_REQUEST_KEY="k")
    second = client.post("/t/x3/bump", HTTP_X_REQUEST_KEY="k")
    assert second["Idempotent-Replayed"] == "true"
    assert first.status_code == 201
    assert client.post("/t/x3/bump", HTTP_IDEMPOTENCY_KEY="k").status_code == 400


def test_anonymous_actor_and_principal(client: Any):
    data = client.get("/plain").json()
    assert data["actor"] == "anonymous"
    assert data["principal"] == "anonymous"


@pytest.mark.django_db
def test_user_actor_and_principal(client: Any, django_user_model: Any):
    user = django_user_model.objects.create_user("dora")
    client.force_login(user)
    data = client.get("/plain").json()
    assert data["actor"] == "dora"
    assert data["principal"] == f"user:{user.pk}"


def test_configurable_actor_and_principal(client: Any, xsm: Any):
    xsm(
        ACTOR="tests.django.test_middleware.actor_from_header",
        IDEMPOTENCY={"PRINCIPAL": "tests.django.test_middleware.tenant_from_header"},
    )
    data = client.get("/plain", HTTP_X_ACTOR="svc\x07-billing", HTTP_X_TENANT="t9").json()
    assert data["actor"] == "svc-billing"  # control characters stripped
    assert data["principal"] == "tenant:t9"


async def test_configurable_actor_in_async_views(async_client: Any, backend: Any, xsm: Any):
    xsm(ACTOR="tests.django.test_middleware.actor_from_header")
    response = await async_client.post(
        "/t/x4/abump", headers={"Idempotency-Key": "k", "X-Actor": "robot"}
    )
    assert response.status_code == 201
    [record] = machines["ticket"].objects.history("ticket:x4")
    assert record.actor == "robot"


@pytest.mark.django_db(transaction=True)
async def test_async_views_resolve_the_user_without_blocking(
    async_client: Any, backend: Any, django_user_model: Any
):
    from asgiref.sync import sync_to_async

    user = await sync_to_async(django_user_model.objects.create_user)("erin")
    await async_client.aforce_login(user)
    response = await async_client.post("/t/x5/abump", headers={"Idempotency-Key": "k"})
    assert response.status_code == 201
    [record] = machines["ticket"].objects.history("ticket:x5")
    assert record.actor == "erin"


def test_actor_must_be_a_string(client: Any, xsm: Any):
    xsm(ACTOR="tests.django.test_middleware.not_a_string")
    client.raise_request_exception = True
    with pytest.raises(ImproperlyConfigured, match="must return a str"):
        client.get("/plain")


def test_decorator_works_without_the_middleware(client: Any, backend: Any, settings: Any):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if "Xsm" not in m]
    first = client.post("/t/x6/bump", HTTP_IDEMPOTENCY_KEY="k", HTTP_X_REQUEST_ID="no-mw")
    assert first.status_code == 201
    assert "X-Request-ID" not in first  # only the middleware echoes it
    assert client.post("/t/x6/bump", HTTP_IDEMPOTENCY_KEY="k")["Idempotent-Replayed"] == "true"
    assert client.get("/t/none/show").status_code == 404  # the decorator maps errors itself
    assert machines["ticket"].objects.history("ticket:x6")[0].correlation_id == "no-mw"


def test_get_request_info_is_cached():
    request = RequestFactory().get("/", HTTP_IDEMPOTENCY_KEY="abc")
    info = get_request_info(request)
    assert isinstance(info, RequestInfo)
    assert get_request_info(request) is info
    assert info.idempotency_key == "abc"


def test_key_for_rules():
    request = RequestFactory().post("/")
    info = get_request_info(request)
    assert info.key_for("GET", frozenset({"POST"})) is None
    with pytest.raises(IdempotencyKeyError, match="need an Idempotency-Key header"):
        info.key_for("POST", frozenset({"POST"}))
    assert info.key_for("PUT", frozenset({"POST"})) is None


def test_middleware_maps_xsm_errors_only():
    middleware = XsmMiddleware(lambda request: None)  # type: ignore[arg-type,return-value]
    request = RequestFactory().get("/")
    response = middleware.process_exception(request, IdempotencyKeyError("bad"))
    assert response is not None and response.status_code == 400
    assert middleware.process_exception(request, ValueError("x")) is None


@pytest.mark.parametrize(
    ("raw", "key"),
    [("abc", "abc"), ('"a b"', "a b"), ('"\\"q\\""', '"q"'), ("base64+/=", "base64+/=")],
)
def test_parse_idempotency_key(raw: str, key: str):
    assert parse_idempotency_key(raw) == key


@pytest.mark.parametrize("raw", ["a,b", "a;b", '"a', '"a\\x"', "", " ", "x" * 2000])
def test_parse_idempotency_key_rejects(raw: str):
    with pytest.raises(IdempotencyKeyError):
        parse_idempotency_key(raw)


@pytest.mark.parametrize("raw", ["a, b", "a,b", '"a", "b"', '"a" ,"b"'])
def test_two_idempotency_key_headers_are_named_as_such(raw: str):
    """A server joins repeated headers with ', ': the message says what happened."""
    with pytest.raises(IdempotencyKeyError, match="several Idempotency-Key values"):
        parse_idempotency_key(raw)


def test_an_idempotency_key_ending_in_a_newline_is_a_400(client: Any, backend: Any):
    response = client.post("/t/nl/bump", HTTP_IDEMPOTENCY_KEY="a\n")
    assert response.status_code == 400


def test_a_request_id_ending_in_a_newline_is_replaced_not_echoed(client: Any):
    # "$" accepted a trailing newline: the echoed header was a BadHeaderError (500)
    response = client.get("/plain", HTTP_X_REQUEST_ID="abc\n")
    correlation = response.json()["correlation_id"]
    assert HEX32.match(correlation), correlation
    assert response["X-Request-ID"] == correlation


@pytest.mark.parametrize("path", ["/_xsm/health", "/_xsm/ready"])
def test_probes_answer_post_with_405_and_allow(path: str, backend: Any):
    from django.test import Client

    response = Client(enforce_csrf_checks=True).post(path)
    assert response.status_code == 405
    assert set(response["Allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}


def test_a_view_cannot_let_a_payload_forge_the_actor(client: Any, backend: Any):
    """A view that splats the body into send() cannot have a body's "actor"
    rewrite the audit trail: the request's actor is recorded, and the view
    gets a clear error saying how to send such a field."""
    response = client.post(
        "/t/f1/splat", data='{"type": "BUMP", "actor": "mallory"}',
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1",
    )  # fmt: skip
    # refused like any event the request cannot send (a 400, not a 500)
    assert response.status_code == 400
    body = problem(response)
    assert body["type"].endswith("/invalid-event") and "actor=" in body["detail"]
    assert machines["ticket"].objects.history("ticket:f1") == []
    assert not machines["ticket"].objects.exists("ticket:f1")


def test_a_payload_field_named_actor_travels_in_a_mapping_event(client: Any, backend: Any):
    response = client.post(
        "/t/f2/splat_mapping", data='{"type": "BUMP", "actor": "mallory"}',
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="k2",
    )  # fmt: skip
    assert response.status_code == 200, response.content
    [record] = machines["ticket"].objects.history("ticket:f2")
    assert record.actor == "anonymous" and record.payload == {"actor": "mallory"}


def test_objects_send_inside_a_request_records_the_requests_user(
    client: Any, backend: Any, django_user_model: Any
):
    user = django_user_model.objects.create_user("ann")
    client.force_login(user)
    client.post("/t/f3/manager_send", HTTP_IDEMPOTENCY_KEY="k3")
    [record] = machines["ticket"].objects.history("ticket:f3")
    assert record.actor == "ann"
