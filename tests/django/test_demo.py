"""The demo project (testproject/): order fulfilment end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from django_xsm import backend as stores
from django_xsm.registry import machines
from testproject.orders import payments
from testproject.orders.receivers import OUTBOX

# The demo keeps its orders as rows (StatechartField): every test uses the
# database, with real commits (post_transition waits for them).
pytestmark = [pytest.mark.urls("testproject.urls"), pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
WIDGETS = {"items": [{"sku": "widget", "qty": 2, "price_cents": 1250}]}


def post(client: Any, url: str, data: Any = None, key: str = "", **extra: Any) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(
        url, json.dumps(data or {}), content_type="application/json", **headers, **extra
    )


def create(client: Any, key: str = "create-1") -> str:
    response = post(client, "/api/orders", WIDGETS, key)
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def deliver(client: Any, order_id: str, amount: int, payment_id: str = "pay_1") -> Any:
    headers, body = payments.delivery(payment_id, order_id, amount)
    meta = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
    return client.post("/webhooks/payments", body, content_type="application/json", **meta)


@pytest.fixture(autouse=True)
def _outbox() -> None:
    OUTBOX.clear()


def test_create_is_idempotent_and_locates_the_order(client: Any, backend: Any):
    first = post(client, "/api/orders", WIDGETS, "c-1")
    again = post(client, "/api/orders", WIDGETS, "c-1")
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again["Location"] == first["Location"] == f"/api/orders/{first.json()['id']}"
    assert first.json()["total_cents"] == 2500
    assert list(machines["order"].objects.keys("order:")) == [f"order:{first.json()['id']}"]
    assert post(client, "/api/orders", {"items": []}, "c-2").status_code == 400
    assert post(client, "/api/orders", WIDGETS).status_code == 400  # no key


def test_the_curl_of_docs_django_md_creates_an_order(client: Any, backend: Any):
    """The command as a user pastes it (shlex splits it as a shell does),
    sent through the test client: its key is a valid Idempotency-Key."""
    import re
    import shlex

    text = (ROOT / "docs" / "django.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(curl -X POST localhost:8000/api/orders .*?)```", text, re.S)
    assert block is not None
    argv = shlex.split(block.group(1).replace("\\\n", " "))  # line continuations
    assert argv[:4] == ["curl", "-X", "POST", "localhost:8000/api/orders"]
    pairs = list(zip(argv[4::2], argv[5::2], strict=True))
    options = dict(pairs)
    headers = dict(value.split(": ", 1) for option, value in pairs if option == "-H")
    response = client.post(
        "/api/orders",
        options["-d"],
        content_type=headers["Content-Type"],
        HTTP_IDEMPOTENCY_KEY=headers["Idempotency-Key"],
    )
    assert response.status_code == 201, response.content
    assert response.json()["total_cents"] == 2500


def test_full_lifecycle_with_webhook_and_async_ship(client: Any, backend: Any):
    order_id = create(client)
    added = post(
        client, f"/api/orders/{order_id}/items", {"sku": "g", "qty": 1, "price_cents": 5}, "i-1"
    )
    assert added.json()["total_cents"] == 2505
    assert post(client, f"/api/orders/{order_id}/checkout", key="co-1").json()["state"] == (
        "awaiting_payment"
    )
    refused = post(
        client, f"/api/orders/{order_id}/items", {"sku": "g", "qty": 1, "price_cents": 5}, "i-2"
    )
    assert refused.status_code == 409
    assert refused.json()["state"] == "awaiting_payment"

    paid = deliver(client, order_id, 2505)
    assert paid.json() == {"accepted": True, "state": "paid", "duplicate": False}
    redelivered = deliver(client, order_id, 2505)
    assert redelivered.status_code == 200
    assert redelivered.json() == {"accepted": True, "state": "paid", "duplicate": True}

    shipped = post(client, f"/api/orders/{order_id}/ship", {"tracking": "T-1"}, "s-1")
    assert shipped.status_code == 200
    assert shipped.json()["state"] == "shipped"

    data = client.get(f"/api/orders/{order_id}").json()
    assert data["value"] == "shipped"
    assert data["status"] == "done"
    assert data["context"]["payment"] == {"id": "pay_1", "amount_cents": 2505}
    events = [(h["event"], h["actor"]) for h in data["history"]]
    assert events == [
        ("ADD_ITEM", "anonymous"),
        ("ADD_ITEM", "anonymous"),
        ("CHECKOUT", "anonymous"),
        ("PAYMENT_RECEIVED", "payments"),
        ("SHIP", "anonymous"),
    ]
    assert [m["state"] for m in OUTBOX] == ["paid", "shipped"]


def test_webhook_refuses_bad_signatures_and_wrong_amounts(client: Any, backend: Any):
    order_id = create(client)
    post(client, f"/api/orders/{order_id}/checkout", key="co")
    headers, body = payments.delivery("pay_x", order_id, 2500)
    forged = client.post(
        "/webhooks/payments",
        body,
        content_type="application/json",
        HTTP_WEBHOOK_ID=headers["webhook-id"],
        HTTP_WEBHOOK_TIMESTAMP=headers["webhook-timestamp"],
        HTTP_WEBHOOK_SIGNATURE="v1,AAAA",
    )
    assert forged.status_code == 401
    stale_stamp = int(time.time()) - 3600
    stale = {
        "webhook-id": "msg_old",
        "webhook-timestamp": str(stale_stamp),
        "webhook-signature": payments.sign("msg_old", stale_stamp, body),
    }
    with pytest.raises(payments.BadSignature, match="tolerance"):
        payments.verify(stale, body)
    short = deliver(client, order_id, 1, payment_id="pay_short")
    assert short.json() == {"accepted": False, "state": "awaiting_payment", "duplicate": False}
    assert machines["order"].objects.get(f"order:{order_id}").value == "awaiting_payment"


def test_unpaid_order_is_cancelled_by_its_timer(client: Any, backend: Any, settings: Any):
    settings.ORDERS_PAYMENT_TIMEOUT_MS = 30_000
    order_id = create(client)
    post(client, f"/api/orders/{order_id}/checkout", key="co")
    order = machines["order"].objects.get(f"order:{order_id}")
    [deadline] = order.deadlines
    assert deadline.due_ms - order.updated_at.timestamp() * 1000 == pytest.approx(30_000, abs=50)
    scanner = stores.get_scanner()
    assert scanner.scan(now=deadline.due_ms - 1).fired == 0
    assert scanner.scan(now=deadline.due_ms + 1).fired == 1
    order = machines["order"].objects.get(f"order:{order_id}")
    assert order.value == "cancelled"
    assert order.context["cancel_reason"] == "payment timeout"
    late = deliver(client, order_id, 2500)
    assert late.json()["accepted"] is False  # the money arrived after the timeout
    assert [m["state"] for m in OUTBOX] == ["cancelled"]


async def test_async_cancel_on_asgi(async_client: Any, backend: Any):
    response = await async_client.post(
        "/api/orders",
        WIDGETS,
        content_type="application/json",
        headers={"Idempotency-Key": "a-1"},
    )
    order_id = response.json()["id"]
    cancelled = await async_client.post(
        f"/api/orders/{order_id}/cancel",
        {"reason": "too slow"},
        content_type="application/json",
        headers={"Idempotency-Key": "a-2"},
    )
    assert cancelled.status_code == 200
    assert cancelled.json()["cancel_reason"] == "too slow"
    again = await async_client.post(
        f"/api/orders/{order_id}/cancel", {}, content_type="application/json",
        headers={"Idempotency-Key": "a-3"},
    )  # fmt: skip
    assert again.status_code == 409


def test_missing_order_is_404(client: Any, backend: Any):
    assert client.get("/api/orders/nope").status_code == 404
    assert post(client, "/api/orders/nope/checkout", key="k").status_code == 404
    assert client.get("/orders/nope/").status_code == 404


def test_html_pages(client: Any, backend: Any):
    order_id = create(client)
    post(client, f"/api/orders/{order_id}/checkout", key="co")
    index = client.get("/")
    assert index.status_code == 200
    assert f"order:{order_id}" in index.content.decode()
    page = client.get(f"/orders/{order_id}/").content.decode()
    assert "awaiting_payment" in page
    assert "Simulate payment webhook" in page
    assert "xstate.after.PAYMENT_TIMEOUT.order.awaiting_payment" in page
    assert page.count("<code>ADD_ITEM</code>") == 1
    assert "<code>CHECKOUT</code>" in page
    redirect = client.post(f"/orders/{order_id}/simulate-payment")
    assert redirect.status_code == 302
    client.post(f"/orders/{order_id}/simulate-payment")  # double click: a duplicate
    page = client.get(f"/orders/{order_id}/").content.decode()
    assert "<code>PAYMENT_RECEIVED</code>" in page
    assert page.count("<code>PAYMENT_RECEIVED</code>") == 1
    assert "Paid with <code>pay_" in page


def test_html_escapes_user_data(client: Any, backend: Any):
    evil = {"items": [{"sku": "<script>alert(1)</script>", "qty": 1, "price_cents": 1}]}
    order_id = post(client, "/api/orders", evil, "x").json()["id"]
    page = client.get(f"/orders/{order_id}/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_manage_py_check_passes_on_the_embedded_default(tmp_path: Path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "DEMO_DB": str(tmp_path / "db.sqlite3"),
    }
    env.pop("REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "WARNING"],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_orders_are_rows_whose_state_column_follows_every_path(client: Any, backend: Any):
    """The API (model-less keyed views), the webhook (objects.send) and the
    timer scanner all commit without the row at hand; the row follows."""
    from django_xsm import backend as xsm_backend
    from testproject.orders.models import Order

    first, second = create(client, "c-a"), create(client, "c-b")
    assert Order.objects.get(pk=first).status == "cart"
    post(client, f"/api/orders/{first}/checkout", key="co-a")
    post(client, f"/api/orders/{second}/checkout", key="co-b")
    deliver(client, first, 2500)
    assert Order.objects.filter(status="paid").get().pk == first
    # created on commit (inside the create view, which then runs once more), checkout, payment
    assert Order.objects.get(pk=first).status_version == 4
    paid = client.get("/?state=paid").content.decode()
    assert f"order:{first}" in paid and f"order:{second}" not in paid
    assert "paid (1)" in paid and "awaiting_payment (1)" in paid
    # the payment timeout, fired by the scanner, moves the unpaid row
    xsm_backend.get_scanner().fire(f"order:{second}", force=True)
    assert Order.objects.get(pk=second).status == "cancelled"


def test_pages_show_money_and_times_as_people_read_them(client: Any, backend: Any):
    order_id = create(client)
    post(client, f"/api/orders/{order_id}/checkout", key="co")
    page = client.get(f"/orders/{order_id}/").content.decode()
    assert "$12.50" in page and "$25.00" in page and "¢" not in page
    assert " UTC" in page and "due at 20" in page  # the pending timer, not raw ISO
    index = client.get("/").content.decode()
    assert index.index(f"order:{order_id}") < index.index("</tbody>")
    newer = create(client, "create-2")
    index = client.get("/").content.decode()
    assert index.index(f"order:{newer}") < index.index(f"order:{order_id}")  # newest first


def test_a_webhook_transition_carries_the_requests_correlation_id(client: Any, backend: Any):
    """objects.send() inside a request (the webhook) takes the request's id
    from the middleware, as @stateful_view blocks do."""
    from django_xsm.registry import machines

    order_id = create(client)
    post(client, f"/api/orders/{order_id}/checkout", key="co")
    headers, body = payments.delivery("pay_9", order_id, 2500)
    meta = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
    client.post(
        "/webhooks/payments", body, content_type="application/json",
        HTTP_X_REQUEST_ID="hook-42", **meta,
    )  # fmt: skip
    [paid] = [r for r in machines["order"].objects.history(f"order:{order_id}")
              if r.event_type == "PAYMENT_RECEIVED"]  # fmt: skip
    assert paid.correlation_id == "hook-42" and paid.actor == "payments"
