"""The demo shop's orders, tested with django-xsm's pytest plugin."""

import json

import pytest

from django_xsm.registry import machines
from testproject.orders import payments
from testproject.orders.models import Order, Receipt
from testproject.orders.receivers import OUTBOX

pytestmark = pytest.mark.django_db

TEA = {"items": [{"sku": "tea", "qty": 2, "price_cents": 450}]}


def post(client, url, data=None, key="a-key"):
    body = json.dumps(data or {})
    return client.post(url, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)


def new_order(client, key="new-order"):
    """An order with two teas, checked out: it waits for its payment."""
    response = post(client, "/api/orders", TEA, key)
    assert response.status_code == 201, response.content
    order_id = response.json()["id"]
    assert post(client, f"/api/orders/{order_id}/checkout", key=f"{key}-co").status_code == 200
    return order_id


def pay(client, order_id, amount_cents=900):
    headers, body = payments.delivery(f"pay-{order_id}", order_id, amount_cents)
    meta = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}
    return client.post("/webhooks/payments", body, content_type="application/json", **meta)


def test_an_unpaid_order_is_cancelled_after_an_hour(client, xsm):
    order_id = new_order(client)
    key = f"order:{order_id}"

    assert xsm.advance(59 * 60) == 0  # 59 minutes: still waiting
    assert xsm.advance(60) == 1  # the hour is up: the timer fired, once

    order = machines["order"].objects.get(key)
    assert order.value == "cancelled"
    assert order.context["cancel_reason"] == "payment timeout"
    assert Order.objects.get(pk=order_id).status == "cancelled"  # the row's column
    assert xsm.history(key)[-1].actor == "xsm:timer"


def test_paying_emits_order_paid_and_its_handler_sends_one_receipt(client, xsm):
    order_id = new_order(client)
    assert pay(client, order_id).status_code == 200

    (paid,) = xsm.emitted
    assert (paid.type, paid.key) == ("order.paid", f"order:{order_id}")
    assert not Receipt.objects.exists()  # nothing delivered yet

    assert xsm.deliver().delivered == 1  # what `manage.py xsm_run_outbox --once` does
    assert Receipt.objects.get().delivery_id == paid.delivery_id
    assert xsm.deliver().delivered == 0  # delivered once
    assert xsm.emitted == [paid]  # still listed after its delivery


def test_a_parcel_the_warehouse_refuses_is_retried_then_compensated(client, xsm):
    order_id = new_order(client)
    pay(client, order_id)
    response = post(client, f"/api/orders/{order_id}/ship", {"warehouse": "flaky"}, "ship")
    assert response.json()["state"] == "shipping"

    assert xsm.deliver().retried == 1  # the flaky warehouse refused: retried later
    assert xsm.deliver().taken == 0  # not due yet
    xsm.advance(60)  # BACKOFF_S: the first retry comes within 60 s
    assert xsm.deliver().retried == 1
    xsm.advance(120)  # the second within 120 s
    result = xsm.deliver()  # the third attempt was the last
    assert (result.dead_lettered, result.compensated) == (1, 1)
    assert machines["order"].objects.get(f"order:{order_id}").value == "shipping_failed"


def test_post_transition_receivers_run_as_in_production(client, xsm):
    OUTBOX.clear()
    order_id = new_order(client)
    pay(client, order_id)
    # the test's transaction never commits; the request's work did
    assert [m["state"] for m in OUTBOX] == ["paid"]


@pytest.mark.parametrize("attempt", [1, 2])
def test_two_tests_with_the_same_key_do_not_see_each_other(client, xsm, attempt):
    response = post(client, "/api/orders", TEA, key="same-key")  # the same order id each time
    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response  # a first request, every time
    key = f"order:{response.json()['id']}"
    assert [r.event_type for r in xsm.history(key)] == ["ADD_ITEM"]
