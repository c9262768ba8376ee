"""``POST /orders/<id>/pay``: one PAY, audited and idempotent, as a sync
view (gunicorn) and as an async view (uvicorn)."""

from __future__ import annotations

from typing import Any

from common import amount_of, body, problem
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from django_xsm.decorators import stateful_view
from django_xsm.middleware import get_request_info

KEY = "order:{order_id}"


@csrf_exempt
@require_POST
@stateful_view("order", key=KEY, create=False)
def pay(request: HttpRequest, order_id: int, *, instance: Any) -> HttpResponse:
    amount = amount_of(request)
    if amount is None:
        return problem(400, "bad-request", "amount_cents must be a positive integer")
    instance.send("PAY", amount_cents=amount)
    key = get_request_info(request).idempotency_key
    return JsonResponse(body(order_id, instance.value, instance.context, key))


@csrf_exempt
@require_POST
@stateful_view("order", key=KEY, create=False)
async def apay(request: HttpRequest, order_id: int, *, instance: Any) -> HttpResponse:
    amount = amount_of(request)
    if amount is None:
        return problem(400, "bad-request", "amount_cents must be a positive integer")
    instance.send("PAY", amount_cents=amount)
    key = get_request_info(request).idempotency_key
    return JsonResponse(body(order_id, instance.value, instance.context, key))
