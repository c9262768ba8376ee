"""The demo's JSON API, payment webhook and HTML pages.

JSON endpoints (every POST needs an ``Idempotency-Key`` header)::

    POST /api/orders                     {"items": [{"sku", "qty", "price_cents"}]}
    GET  /api/orders/<id>
    POST /api/orders/<id>/items          {"sku", "qty", "price_cents"}
    POST /api/orders/<id>/checkout
    POST /api/orders/<id>/cancel         {"reason"}        (async view)
    POST /api/orders/<id>/ship           {"tracking", "warehouse": "main" | "flaky"}
                                         (async, pessimistic lock)
    POST /api/orders/<id>/switch-warehouse  (after a failed shipment: the main one)
    POST /webhooks/payments              signed payment.succeeded delivery

The API authenticates nobody (it is a demo), so it is CSRF-exempt: it reads
no cookies. An API authenticated by session cookies must keep CSRF on.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from django_xsm.decorators import stateful_view
from django_xsm.http import problem_response
from django_xsm.middleware import get_request_info
from django_xsm.registry import machines
from django_xsm.stream import staff_may_view

from . import payments
from .machines import MAIN_WAREHOUSE, WAREHOUSES
from .models import Order, Receipt

ORDER_KEY = "order:{order_id}"


class BadInput(Exception):
    """The request body is not what the endpoint expects (400)."""


def _json_body(request: HttpRequest) -> dict[str, Any]:
    if not request.body:
        return {}
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        raise BadInput("the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadInput("the body must be a JSON object")
    return data


def _item(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise BadInput("an item is an object with sku, qty and price_cents")
    sku, qty, price = data.get("sku"), data.get("qty"), data.get("price_cents")
    if not isinstance(sku, str) or not 1 <= len(sku) <= 64:
        raise BadInput("sku must be a string of 1-64 characters")
    if isinstance(qty, bool) or not isinstance(qty, int) or not 1 <= qty <= 100:
        raise BadInput("qty must be an integer from 1 to 100")
    if isinstance(price, bool) or not isinstance(price, int) or not 0 <= price <= 10_000_000:
        raise BadInput("price_cents must be an integer from 0 to 10000000")
    return {"sku": sku, "qty": qty, "price_cents": price}


def _bad(request: HttpRequest, exc: BadInput) -> HttpResponse:
    return problem_response(request, 400, "bad-request", "Bad request", str(exc))


def order_id_of(key: str) -> str:
    return key.split(":", 1)[1]


def _order(instance: Any) -> dict[str, Any]:
    return {
        "id": order_id_of(instance.key),
        "state": instance.value,
        "status": instance.status,
        "items": instance.context["items"],
        "total_cents": instance.context["total_cents"],
        "payment": instance.context["payment"],
        "cancel_reason": instance.context["cancel_reason"],
        "tracking": instance.context["tracking"],
        "warehouse": instance.context.get("warehouse"),
        "shipping_error": instance.context.get("shipping_error"),
    }


def new_order_key(request: HttpRequest) -> str:
    """A new order's key. With an Idempotency-Key it is derived from it (and
    the principal), so a retried create lands on the same order and gets
    the first response back instead of creating a second order."""
    info = get_request_info(request)
    if info.idempotency_key is None:
        return "order:" + secrets.token_hex(8)
    seed = f"{info.principal}\0{info.idempotency_key}".encode()
    return "order:" + hashlib.sha256(seed).hexdigest()[:16]


# --- JSON API ------------------------------------------------------------------------


@csrf_exempt
@require_POST
@stateful_view("order", key=new_order_key)
def create_order(request: HttpRequest, *, instance: Any) -> HttpResponse:
    try:
        raw = _json_body(request).get("items")
        if not isinstance(raw, list) or not raw:
            raise BadInput("items must be a non-empty list")
        items = [_item(x) for x in raw]
    except BadInput as exc:
        return _bad(request, exc)  # nothing sent: nothing stored, the key is released
    # The row and the statechart are created together; a retried create
    # (same key) finds both. The row's INSERT commits at once (autocommit)
    # and stores its statechart, so this block's commit conflicts and the
    # view runs once more on it; the commit's projection fills the status.
    Order.objects.get_or_create(id=order_id_of(instance.key))
    for item in items:
        instance.send("ADD_ITEM", **item)
    response = JsonResponse(_order(instance), status=201)
    response["Location"] = reverse("orders:api-order", args=[order_id_of(instance.key)])
    return response


@require_GET
def get_order(request: HttpRequest, order_id: str) -> HttpResponse:
    # The manager's read-only view; a missing order raises DoesNotExist,
    # which XsmMiddleware answers with a 404 problem.
    order = machines["order"].objects.get(ORDER_KEY.format(order_id=order_id))
    data = order.to_dict()
    data["history"] = [
        {
            "seq": r.seq,
            "event": r.event_type,
            "from": r.from_state,
            "to": r.to_state,
            "actor": r.actor,
            "at": r.timestamp.isoformat(),
        }
        for r in machines["order"].objects.latest(order.key, 50)
    ]
    return JsonResponse(data)


@csrf_exempt
@require_POST
@stateful_view("order", key=ORDER_KEY, create=False)
def add_item(request: HttpRequest, order_id: str, *, instance: Any) -> HttpResponse:
    try:
        item = _item(_json_body(request))
    except BadInput as exc:
        return _bad(request, exc)
    instance.send("ADD_ITEM", **item)
    return JsonResponse(_order(instance))


@csrf_exempt
@require_POST
@stateful_view("order", key=ORDER_KEY, create=False)
def checkout(request: HttpRequest, order_id: str, *, instance: Any) -> HttpResponse:
    instance.send("CHECKOUT")  # an empty cart: the guard refuses, 409
    return JsonResponse(_order(instance))


@csrf_exempt
@require_POST
@stateful_view("order", key=ORDER_KEY, create=False)
async def cancel(request: HttpRequest, order_id: str, *, instance: Any) -> HttpResponse:
    try:
        reason = str(_json_body(request).get("reason") or "")[:200]
    except BadInput as exc:
        return _bad(request, exc)
    # A mapping event: send()'s own keyword 'reason' is the audit-log reason,
    # while this 'reason' belongs to the event's payload (and the log's too).
    instance.send({"type": "CANCEL", "reason": reason}, reason=reason)
    return JsonResponse(_order(instance))


@csrf_exempt
@require_POST
@stateful_view("order", key=ORDER_KEY, create=False, lock="pessimistic")
async def ship(request: HttpRequest, order_id: str, *, instance: Any) -> HttpResponse:
    try:
        body = _json_body(request)
        tracking = str(body.get("tracking") or "")[:64]
        warehouse = body.get("warehouse") or MAIN_WAREHOUSE
        if warehouse not in WAREHOUSES:
            raise BadInput(f"warehouse must be one of {', '.join(WAREHOUSES)}")
    except BadInput as exc:
        return _bad(request, exc)
    # Emits order.shipped: the outbox worker calls the warehouse (effects.py).
    instance.send("SHIP", tracking=tracking, warehouse=warehouse)
    return JsonResponse(_order(instance))


@csrf_exempt
@require_POST
@stateful_view("order", key=ORDER_KEY, create=False)
def switch_warehouse(request: HttpRequest, order_id: str, *, instance: Any) -> HttpResponse:
    """A failed shipment goes to the main warehouse instead; redrive its dead
    letter (the admin's Outbox page) to ship it from there."""
    instance.send("SWITCH_WAREHOUSE")  # only in shipping_failed: 409 otherwise
    return JsonResponse(_order(instance))


# --- payment webhook -----------------------------------------------------------------


def handle_delivery(headers: Any, body: bytes) -> tuple[int, dict[str, Any]]:
    """Verify and apply one webhook delivery; returns (status, JSON body).

    The webhook id is the idempotency key (scope ``payments``): a
    redelivery returns the first answer with ``duplicate: true`` and
    changes nothing. A payment the order cannot take (wrong amount, order
    cancelled) is acknowledged with ``accepted: false`` so the provider
    stops retrying; nothing is stored for it.
    """
    try:
        webhook_id = payments.verify(headers, body)
        event = json.loads(body)
        data = event["data"]
        key = ORDER_KEY.format(order_id=str(data["order_id"]))
        payment_id, amount = str(data["payment_id"]), int(data["amount_cents"])
    except payments.BadSignature as exc:
        return 401, {"error": f"bad signature: {exc}"}
    except (ValueError, KeyError, TypeError):
        return 400, {"error": "malformed payment event"}
    if event.get("type") != "payment.succeeded":
        return 200, {"ignored": event.get("type")}
    receipt = machines["order"].objects.send(
        key,
        "PAYMENT_RECEIVED",
        actor="payments",
        idempotency_key=webhook_id,
        principal="payments",
        reason="webhook",
        payment_id=payment_id,
        amount_cents=amount,
    )
    return 200, {
        "accepted": bool(receipt.accepted),
        "state": receipt.value,
        "duplicate": bool(getattr(receipt, "duplicate", False)),
    }


@csrf_exempt
@require_POST
def payment_webhook(request: HttpRequest) -> HttpResponse:
    status, data = handle_delivery(request.headers, request.body)
    return JsonResponse(data, status=status)


# --- HTML ------------------------------------------------------------------------------


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    """The newest orders, read from the ORM: the state column is a plain,
    indexed column (``?state=paid`` is ``filter(status="paid")``)."""
    state = request.GET.get("state", "")
    rows = Order.objects.all()
    if state:
        rows = rows.filter(status=state)
    counts = Order.objects.values_list("status").annotate(n=Count("pk")).order_by("status")
    return render(
        request,
        "orders/index.html",
        {"orders": rows[:50], "counts": list(counts), "state": state},
    )


@require_GET
def detail(request: HttpRequest, order_id: str) -> HttpResponse:
    objects = machines["order"].objects
    try:
        order = objects.get(ORDER_KEY.format(order_id=order_id))
    except objects.DoesNotExist:
        raise Http404("No such order") from None
    newest = objects.latest(order.key, 1)
    return render(
        request,
        "orders/detail.html",
        {
            "order": order,
            "order_id": order_id,
            # the live stream (EventSource) resumes after the newest record
            "last_seq": newest[-1].seq if newest else 0,
            "history": objects.history(order.key, limit=200),
            "deadlines": order.to_dict()["deadlines"],
            # written by the outbox handler of order.paid (effects.py)
            "receipts": Receipt.objects.filter(order_id=order_id),
        },
    )


def may_follow(request: HttpRequest, key: str) -> bool:
    """``XSM['STREAM']['PERMISSION']`` of the demo: an order's page is public
    (it is a demo), so is its live stream; other instances need the admin's
    staff permission (the default)."""
    return key.startswith("order:") or staff_may_view(request, key)


@require_POST
def simulate_payment(request: HttpRequest, order_id: str) -> HttpResponse:
    """Deliver a correctly signed webhook for the order's total, as the
    provider would (CSRF-protected form; the payment id is per order, so a
    double click is one payment and one duplicate)."""
    objects = machines["order"].objects
    try:
        order = objects.get(ORDER_KEY.format(order_id=order_id))
    except objects.DoesNotExist:
        raise Http404("No such order") from None
    headers, body = payments.delivery(
        f"pay_{order_id}", order_id, int(order.context["total_cents"])
    )
    handle_delivery(headers, body)
    return HttpResponseRedirect(reverse("orders:detail", args=[order_id]))
