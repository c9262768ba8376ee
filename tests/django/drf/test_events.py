"""``POST /api/orders/{pk}/events/``: every row of the HTTP table (docs/http.md)
through DRF's APIClient, on SQLite and PostgreSQL, on fakeredis and live."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_xsm.exceptions import NotDurableError, XsmError
from django_xsm.registry import machines
from tests.django.drf import views
from tests.django.drf.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order, Parcel, Shipment, SlugOrder

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]

PROBLEM = "application/problem+json"


def send(
    api: Any, pk: Any, body: Any, key: str | None = "k1", prefix: str = "orders", **extra: Any
) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api.post(f"/api/{prefix}/{pk}/events/", body, format="json", **headers, **extra)


def problem(response: Any, slug: str | None = None) -> dict[str, Any]:
    """The RFC 9457 body (its content type, status and type checked)."""
    assert response["Content-Type"] == PROBLEM, response["Content-Type"]
    body: dict[str, Any] = json.loads(response.content)
    assert body["status"] == response.status_code
    if slug is None:
        assert body["type"] == "about:blank"
        assert body["title"]
    else:
        assert body["type"] == f"http://testserver/_xsm/problems/{slug}", body["type"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def order(alias: str, **fields: Any) -> Order:
    return Order.objects.using(alias).create(**fields)


def history(row: Order) -> list[Any]:
    return list(machines["shop"].objects.history(f"shop:{row.pk}"))


# --- success and replay -----------------------------------------------------------------


def test_an_event_is_sent_as_the_user_and_moves_the_row(
    api: Any, backend: Any, alias: str, alice: Any
) -> None:
    row = order(alias, total=7)
    api.force_authenticate(alice)
    response = send(api, row.pk, {"type": "PAY", "amount": 10})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "Idempotent-Replayed" not in response
    assert response.json() == {
        "type": "PAY",
        "state": "paid",
        "value": "paid",
        "changed": True,
        "events": [{"type": "SHIP", "conditional": False}],  # REFUND needs a permission
    }
    assert row_in_db(Order, row.pk, alias) == ("paid", 1)
    [record] = history(row)
    assert (record.event_type, record.actor, record.idempotency_key) == ("PAY", "alice", "k1")
    assert record.payload == {"amount": 10}


def test_a_repeated_key_replays_the_stored_answer(
    api: Any, backend: Any, alias: str, alice: Any
) -> None:
    row = order(alias)
    api.force_authenticate(alice)
    first = send(api, row.pk, {"type": "ADD", "n": 2}, key="add-1")
    again = send(api, row.pk, {"type": "ADD", "n": 2}, key="add-1")
    assert first.status_code == again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again["Content-Type"] == "application/json"
    assert again.json() == first.json()
    assert views.CALLS["perform_event"] == 1  # the replay ran nothing
    assert [r.event_type for r in history(row)] == ["ADD"]
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 2}


def test_keys_are_scoped_to_the_user(
    api: Any, backend: Any, alias: str, alice: Any, django_user_model: Any
) -> None:
    row = order(alias)
    bob = django_user_model.objects.create_user("bob")
    api.force_authenticate(alice)
    send(api, row.pk, {"type": "ADD"}, key="same")
    api.force_authenticate(bob)
    other = send(api, row.pk, {"type": "ADD"}, key="same")
    assert other.status_code == 200 and "Idempotent-Replayed" not in other
    assert [r.actor for r in history(row)] == ["alice", "bob"]


def test_an_anonymous_client_acts_as_anonymous(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    assert send(api, row.pk, {"type": "PAY_ANYWAY"}).status_code == 200
    assert [r.actor for r in history(row)] == ["anonymous"]


def test_the_body_cannot_forge_the_actor(api: Any, backend: Any, alias: str, alice: Any) -> None:
    row = order(alias)
    api.force_authenticate(alice)
    body = {"type": "ADD", "n": 3, "actor": "mallory", "correlation_id": "x", "reason": "r"}
    assert send(api, row.pk, body).status_code == 200
    [record] = history(row)
    assert record.actor == "alice" and record.correlation_id != "x" and record.reason == ""
    assert record.payload == {"n": 3, "actor": "mallory", "correlation_id": "x", "reason": "r"}


def test_a_payload_member_named_strict_is_payload(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    assert send(api, row.pk, {"type": "ADD", "strict": False}).status_code == 200
    assert history(row)[0].payload == {"strict": False}


def test_the_correlation_id_is_the_requests(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    response = send(api, row.pk, {"type": "ADD"}, HTTP_X_REQUEST_ID="req-42")
    assert response["X-Request-ID"] == "req-42"
    assert history(row)[0].correlation_id == "req-42"


def test_an_answer_over_the_size_limit_replays_empty(
    api: Any, backend: Any, alias: str, xsm: Any
) -> None:
    xsm(IDEMPOTENCY={"MAX_RESPONSE_BYTES": 16})
    row = order(alias)
    first = send(api, row.pk, {"type": "ADD"}, key="big")
    again = send(api, row.pk, {"type": "ADD"}, key="big")
    assert first.status_code == again.status_code == 200 and len(first.content) > 16
    assert again.content == b"" and again["Idempotent-Replayed"] == "true"
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 1}


def test_an_optional_key_is_honoured_when_sent(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    assert send(api, row.pk, {"type": "ADD"}, key=None, prefix="optional-orders").status_code == 200
    assert send(api, row.pk, {"type": "ADD"}, key=None, prefix="optional-orders").status_code == 200
    keyed = send(api, row.pk, {"type": "ADD"}, key="once", prefix="optional-orders")
    replay = send(api, row.pk, {"type": "ADD"}, key="once", prefix="optional-orders")
    assert replay["Idempotent-Replayed"] == "true" and replay.json() == keyed.json()
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 3}
    bad = send(api, row.pk, {"type": "ADD"}, key="two words", prefix="optional-orders")
    assert bad.status_code == 400  # a malformed key is never ignored


def test_a_generic_viewset_and_a_compound_state(api: Any, backend: Any, alias: str) -> None:
    parcel = Parcel.objects.using(alias).create()
    response = send(api, parcel.pk, {"type": "PACKED"}, prefix="parcels")
    assert response.status_code == 200
    assert response.json()["state"] == "shipping.picked"
    assert response.json()["value"] == {"shipping": "picked"}
    assert api.get(f"/api/parcels/{parcel.pk}/").json()["state"] == {"shipping": "picked"}


def test_statechart_field_names_one_of_several(api: Any, backend: Any, alias: str) -> None:
    shipment = Shipment.objects.using(alias).create()
    response = send(api, shipment.pk, {"type": "PACKED"}, prefix="deliveries")
    assert response.status_code == 200 and response.json()["state"] == "shipping.picked"
    shipment.refresh_from_db()
    assert shipment.delivery == "shipping.picked" and shipment.payment == "cart"


def test_a_model_with_several_fields_needs_statechart_field() -> None:
    from django_xsm.contrib.drf.mixins import statechart_field_of

    with pytest.raises(ImproperlyConfigured, match="set statechart_field"):
        statechart_field_of(Shipment, None)
    with pytest.raises(ImproperlyConfigured, match="has no StatechartField 'nope'"):
        statechart_field_of(Order, "nope")
    assert statechart_field_of(Shipment, "payment").name == "payment"


# --- 400 --------------------------------------------------------------------------------


def test_a_missing_key_is_400_and_sends_nothing(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    response = send(api, row.pk, {"type": "ADD"}, key=None)
    assert response.status_code == 400
    assert "Idempotency-Key" in problem(response, "idempotency-key")["detail"]
    assert views.CALLS["perform_event"] == 0
    assert not machines["shop"].objects.exists(f"shop:{row.pk}")


@pytest.mark.parametrize("raw", ["x" * 256, "has space", '"unterminated', "a,b", "caf\u00e9"])
def test_a_malformed_key_is_400(api: Any, backend: Any, alias: str, raw: str) -> None:
    row = order(alias)
    response = send(api, row.pk, {"type": "ADD"}, key=raw)
    assert response.status_code == 400
    problem(response, "idempotency-key")


@pytest.mark.parametrize(
    ("body", "member"),
    [
        ([{"type": "ADD"}], "non_field_errors"),  # not an object
        ({"n": 1}, "type"),  # no type
        ({"type": ""}, "type"),
        ({"type": 7}, "type"),  # not a string (unknown and reserved types:
        ({"type": None}, "type"),  # tests/django/drf/test_event_types.py)
    ],
)
def test_a_bad_body_is_400_and_claims_no_key(
    api: Any, backend: Any, alias: str, body: Any, member: str
) -> None:
    row = order(alias)
    response = send(api, row.pk, body, key="k")
    assert response.status_code == 400
    assert member in problem(response)["errors"]
    # nothing was claimed: the same key with a good body is a new request
    assert send(api, row.pk, {"type": "ADD"}, key="k").status_code == 200


def test_unparsable_json_is_400(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    response = api.post(
        f"/api/orders/{row.pk}/events/", "{nope", content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k",
    )  # fmt: skip
    assert response.status_code == 400
    assert "JSON parse error" in problem(response)["detail"]


# --- 403 --------------------------------------------------------------------------------


def test_an_event_needing_a_permission_is_403_without_it(
    api: Any, backend: Any, alias: str, alice: Any, refunder: Any
) -> None:
    row, other = order(alias), order(alias)
    for paid in (row, other):
        machines["shop"].objects.send(f"shop:{paid.pk}", "PAY_ANYWAY", create=True)
    api.force_authenticate(alice)
    response = send(api, row.pk, {"type": "REFUND"}, key="r")
    assert response.status_code == 403
    body = problem(response, "forbidden")  # what @stateful_view answers
    assert body["event"] == "REFUND" and body["detail"] == "You may not send REFUND to this order"
    assert views.CALLS["perform_event"] == 0
    # nothing was claimed: alice's key is free for an event she may send
    assert send(api, row.pk, {"type": "SHIP"}, key="r").status_code == 200
    api.force_authenticate(refunder)
    allowed = send(api, other.pk, {"type": "REFUND"}, key="r")
    assert allowed.status_code == 200 and allowed.json()["state"] == "refunded"
    assert row_in_db(Order, other.pk, alias) == ("refunded", 2)
    assert [r.actor for r in history(other)] == ["", "rita"]


def test_events_without_a_permission_are_open_to_everyone(
    api: Any, backend: Any, alias: str
) -> None:
    row = order(alias)
    assert send(api, row.pk, {"type": "PAY_ANYWAY"}).status_code == 200  # anonymous
    forbidden = send(api, row.pk, {"type": "REFUND"}, key="k2")
    assert forbidden.status_code == 403


def test_drfs_own_refusals_are_problems_too(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    response = send(api, row.pk, {"type": "ADD"}, prefix="members-orders")
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Basic")
    assert "credentials" in problem(response)["detail"]
    assert not machines["shop"].objects.exists(f"shop:{row.pk}")


# --- 404 --------------------------------------------------------------------------------


@pytest.mark.parametrize("pk", ["424242", "abc"])
def test_a_missing_row_is_404(api: Any, backend: Any, alias: str, pk: str) -> None:
    response = send(api, pk, {"type": "ADD"})
    assert response.status_code == 404
    assert problem(response, "not-found")["detail"] == f"No fieldapp.Order with pk='{pk}'"
    assert list(backend.store.list_keys("")) == []


def test_a_row_whose_key_is_invalid_is_400(api: Any, backend: Any, alias: str) -> None:
    SlugOrder.objects.using(alias).create(slug="a\nb")  # a newline inside the key
    response = send(api, "a%0Ab", {"type": "ADD"}, prefix="slug-orders")
    assert response.status_code == 400
    problem(response, "invalid-key")
    assert send(api, "nope", {"type": "ADD"}, prefix="slug-orders").status_code == 404


# --- 409 --------------------------------------------------------------------------------


def test_an_event_the_state_refuses_is_409_and_releases_the_key(
    api: Any, backend: Any, alias: str
) -> None:
    row = order(alias)
    response = send(api, row.pk, {"type": "SHIP"}, key="s")
    assert response.status_code == 409 and "Retry-After" not in response
    body = problem(response, "event-not-accepted")
    assert (body["event"], body["state"], body["reason"]) == ("SHIP", "cart", "no-transition")
    refused = send(api, row.pk, {"type": "PAY", "amount": 1}, key="p")
    assert problem(refused, "event-not-accepted")["guards"] == ["paysEnough"]
    assert row_in_db(Order, row.pk, alias) == ("cart", 0)
    # nothing was committed: the same key runs again
    assert send(api, row.pk, {"type": "PAY", "amount": 10}, key="p").status_code == 200


def _racer(times: int) -> None:
    left = {"n": times}

    def race(view: Any, block: Any, row: Any, event: Any) -> None:
        if left["n"] > 0:
            left["n"] -= 1
            machines["shop"].objects.send(block.key, "ADD", actor="racer")

    views.HOOK["before_send"] = race


def test_a_conflict_is_retried(api: Any, backend: Any, alias: str, xsm: Any) -> None:
    # optimistic on every attempt: the racer inside the block can win again
    # (with the default lock the re-run holds the lock: the next test)
    xsm(LOCK="optimistic")
    row = order(alias)
    send(api, row.pk, {"type": "ADD"}, key="first")
    _racer(2)  # attempts 1 and 2 conflict, 3 wins (CONFLICT_RETRIES is 2)
    response = send(api, row.pk, {"type": "ADD"}, key="second")
    assert response.status_code == 200
    assert views.CALLS["perform_event"] == 1 + 3
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 4}
    assert row_in_db(Order, row.pk, alias) == ("cart", 4)


def test_with_the_default_lock_the_retry_waits_in_the_lock_queue(
    api: Any, backend: Any, alias: str
) -> None:
    row = order(alias)
    send(api, row.pk, {"type": "ADD"}, key="first")
    seen: list[tuple[str, str, str | None]] = []
    left = {"n": 1}

    def race(view: Any, block: Any, row: Any, event: Any) -> None:
        holder = backend.store.lock_holder(block.key)
        seen.append((type(block.options.lock).__name__, block.token, holder))
        if left["n"] > 0:  # another writer commits during the first attempt
            left["n"] -= 1
            machines["shop"].objects.send(block.key, "ADD", actor="racer")

    views.HOOK["before_send"] = race
    response = send(api, row.pk, {"type": "ADD"}, key="second")
    assert response.status_code == 200
    first, (strategy, token, holder) = seen
    assert first == ("OptimisticLock", "", None)
    assert strategy == "PessimisticLock" and token and holder == token
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 3}
    assert row_in_db(Order, row.pk, alias) == ("cart", 3)


def test_a_conflict_after_the_retries_is_409_with_retry_after(
    api: Any, backend: Any, alias: str
) -> None:
    row = order(alias)
    send(api, row.pk, {"type": "ADD"}, key="first", prefix="no-retry-orders")
    _racer(1)
    response = send(api, row.pk, {"type": "ADD"}, key="second", prefix="no-retry-orders")
    assert response.status_code == 409 and response["Retry-After"] == "1"
    body = problem(response, "conflict")
    assert (body["expected_version"], body["actual_version"], body["retry_after"]) == (1, 2, 1)
    # the key was released: the retry is applied once
    assert send(api, row.pk, {"type": "ADD"}, key="second", prefix="no-retry-orders").json()[
        "changed"
    ]
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 3}


def test_a_held_lock_is_409_with_retry_after(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    with row.status.open(lock="pessimistic", create=True):
        response = send(api, row.pk, {"type": "ADD"}, prefix="locked-orders")
    assert response.status_code == 409 and int(response["Retry-After"]) >= 1
    assert problem(response, "locked")["key"] == f"shop:{row.pk}"
    assert send(api, row.pk, {"type": "ADD"}, prefix="locked-orders").status_code == 200


def test_the_same_key_in_flight_is_409_with_retry_after(
    api: Any, backend: Any, alias: str, alice: Any
) -> None:
    row = order(alias)
    api.force_authenticate(alice)
    nested: list[Any] = []

    def duplicate(view: Any, block: Any, row: Any, event: Any) -> None:
        if not nested:  # the first request is in its block: send it again
            nested.append(send(api, row.pk, {"type": "ADD"}, key="slow"))

    views.HOOK["before_send"] = duplicate
    first = send(api, row.pk, {"type": "ADD"}, key="slow")
    [second] = nested
    assert second.status_code == 409 and int(second["Retry-After"]) >= 1
    body = problem(second, "in-flight")
    assert body["idempotency_key"] == "slow" and body["retry_after"] == int(second["Retry-After"])
    assert first.status_code == 200
    third = send(api, row.pk, {"type": "ADD"}, key="slow")
    assert third["Idempotent-Replayed"] == "true" and third.json() == first.json()
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 1}


# --- 422 --------------------------------------------------------------------------------


def test_the_same_key_with_another_body_is_422(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    send(api, row.pk, {"type": "ADD", "n": 1}, key="k")
    response = send(api, row.pk, {"type": "ADD", "n": 2}, key="k")
    assert response.status_code == 422
    assert problem(response, "idempotency-mismatch")["idempotency_key"] == "k"
    other_row = send(api, order(alias).pk, {"type": "ADD", "n": 2}, key="k")
    assert other_row.status_code == 200  # keys are scoped to the instance


def test_a_value_the_store_cannot_keep_is_422(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    response = api.post(
        f"/api/orders/{row.pk}/events/", '{"type": "ADD", "text": "\\ud800"}',
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="u",
    )  # fmt: skip
    assert response.status_code == 422
    assert "$." in problem(response, "unstorable-value")["detail"]
    assert not machines["shop"].objects.exists(f"shop:{row.pk}")


# --- 503 and 500 ------------------------------------------------------------------------


def test_an_unavailable_store_is_503_with_retry_after(api: Any, xsm: Any, alias: str) -> None:
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    row = order(alias)
    response = send(api, row.pk, {"type": "ADD"})
    assert response.status_code == 503 and int(response["Retry-After"]) >= 1
    problem(response, "unavailable")
    assert "127.0.0.1" not in response.content.decode()


def test_a_commit_not_on_enough_replicas_is_503(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)

    def not_durable(view: Any, block: Any, row: Any, event: Any) -> None:
        raise NotDurableError(key=block.key, required=1, acknowledged=0, retry_after_s=2)

    views.HOOK["before_send"] = not_durable
    response = send(api, row.pk, {"type": "ADD"})
    assert response.status_code == 503 and response["Retry-After"] == "2"
    body = problem(response, "not-durable")
    assert (body["replicas_required"], body["replicas_acknowledged"]) == (1, 0)


@pytest.mark.live
def test_a_real_commit_without_replicas_is_503_not_durable(
    api: Any, live_url: str, xsm: Any, alias: str
) -> None:
    """A standalone server has no replica to acknowledge: MIN_REPLICAS=1 fails."""
    import uuid

    from django_xsm import backend as stores
    from tests.support import delete_namespace

    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    xsm(REDIS_URL=live_url, PREFIX=prefix, EMBEDDED=None,
        DURABILITY={"MIN_REPLICAS": 1, "TIMEOUT_MS": 50})  # fmt: skip
    try:
        row = order(alias)
        response = send(api, row.pk, {"type": "ADD"})
        assert response.status_code == 503 and int(response["Retry-After"]) >= 1
        problem(response, "not-durable")
    finally:
        found = stores.get_backend()
        delete_namespace(found.client, prefix)
        found.client.close()


def test_any_other_error_is_a_500_problem(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)

    def broken(view: Any, block: Any, row: Any, event: Any) -> None:
        raise XsmError("a corrupt record, say")

    views.HOOK["before_send"] = broken
    response = send(api, row.pk, {"type": "ADD"})
    assert response.status_code == 500
    body = problem(response, "internal")
    assert "corrupt" not in body["detail"]  # internals stay in the log


def test_an_instance_of_a_chart_changed_without_a_version_bump_is_machine_changed(
    api: Any, backend: Any, alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fieldapp import machines as charts

    row = order(alias)
    assert send(api, row.pk, {"type": "ADD"}).status_code == 200
    monkeypatch.setattr(charts, "SHOP_ORDER", charts.SHOP_ORDER_RENAMED)
    machines.reset()  # the deploy: same machine id and version, a state renamed
    response = send(api, row.pk, {"type": "ADD"}, key="k2")
    assert response.status_code == 500 and "Retry-After" not in response
    body = problem(response, "machine-changed")
    assert "another chart structure" in body["detail"]
    assert row_in_db(Order, row.pk, alias) == ("cart", 1)  # nothing written


def test_with_debug_an_unmapped_error_reaches_the_debug_page(
    api: Any, backend: Any, alias: str, settings: Any
) -> None:
    settings.DEBUG = True
    row = order(alias)

    def broken(view: Any, block: Any, row: Any, event: Any) -> None:
        raise XsmError("a corrupt record, say")

    views.HOOK["before_send"] = broken
    with pytest.raises(XsmError, match="corrupt"):
        send(api, row.pk, {"type": "ADD"})
