"""``POST /orders/<id>/pay`` the way django-fsm's and django-fsm-log's docs
have it, plus an idempotency table: in ONE ``transaction.atomic()``, lock
the row (``select_for_update()``), look the key up (replay or 422), check
``can_proceed``, run the ``@transition``, save, store the response under
the key. The row lock serialises every request on one order, so the key
lookup after it sees any committed twin."""

from __future__ import annotations

import hashlib
import json

from common import KEY_RE, amount_of, body, problem
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from django_fsm import can_proceed

from .models import IdempotencyKey, Order

SCOPE = "anonymous"


def fingerprint(request: HttpRequest) -> str:
    h = hashlib.sha256()
    for part in (request.method or "", request.get_full_path(), request.content_type or ""):
        h.update(part.encode() + b"\0")
    h.update(request.body)
    return h.hexdigest()


def replay(row: IdempotencyKey) -> HttpResponse:
    resp = HttpResponse(bytes(row.body), status=row.status, content_type=row.content_type)
    resp["Idempotent-Replayed"] = "true"
    return resp


@csrf_exempt
@require_POST
def pay(request: HttpRequest, order_id: int) -> HttpResponse:
    key = request.headers.get("Idempotency-Key", "")
    if not KEY_RE.match(key):
        return problem(400, "idempotency-key", "send an Idempotency-Key header")
    amount = amount_of(request)
    if amount is None:
        return problem(400, "bad-request", "amount_cents must be a positive integer")
    fp = fingerprint(request)
    try:
        with transaction.atomic():
            try:
                order = Order.objects.select_for_update().get(pk=order_id)
            except Order.DoesNotExist:
                return problem(404, "not-found", f"no order {order_id}")
            done = IdempotencyKey.objects.filter(scope=SCOPE, order=order, key=key).first()
            if done is not None:
                if done.fingerprint != fp:
                    return problem(422, "idempotency-mismatch", "key used for another request")
                return replay(done)
            if not can_proceed(order.pay):
                return problem(409, "event-not-accepted", f"PAY not accepted in {order.state}")
            order.pay(amount, description=key)
            order.save(update_fields=["state", "payments", "paid_cents"])
            content = json.dumps(
                body(
                    order_id,
                    order.state,
                    {"payments": order.payments, "paid_cents": order.paid_cents},
                    key,
                )
            ).encode()
            IdempotencyKey.objects.create(
                scope=SCOPE, order=order, key=key, fingerprint=fp, status=200,
                content_type="application/json", body=content,
            )  # fmt: skip
    except IntegrityError:  # a twin committed first (cannot happen under the row lock)
        return problem(409, "in-flight", "the same key is being processed")
    return HttpResponse(content, status=200, content_type="application/json")
