"""``POST /orders/<id>/pay`` on the peer: ``persisted_retry`` (load, send,
save with a version fence; a conflict re-runs the send, like
``@stateful_view``'s retries) with the request's Idempotency-Key on the
event. The peer stores the event's receipt, not the HTTP response: a
replay answers the first status with the order's current body and
``Idempotent-Replayed: true``."""

from __future__ import annotations

from typing import Any

from common import KEY_RE, amount_of, body, problem
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from xstate_statemachine.exceptions import ConflictError
from xstate_statemachine.persistence import KeyNotFoundError, persisted_retry
from xstate_statemachine.receipts import receipt_to_status

from . import machines


@csrf_exempt
@require_POST
def pay(request: HttpRequest, order_id: int) -> HttpResponse:
    key = request.headers.get("Idempotency-Key", "")
    if not KEY_RE.match(key):
        return problem(400, "idempotency-key", "send an Idempotency-Key header")
    amount = amount_of(request)
    if amount is None:
        return problem(400, "bad-request", "amount_cents must be a positive integer")

    def send(interp: Any) -> tuple[Any, Any, dict[str, Any]]:
        receipt = interp.send(
            "PAY", wait=True, idempotency_key=key, amount_cents=amount,
            actor="anonymous", correlation_id=key,
        )  # fmt: skip
        state = sorted(s.split(".", 1)[-1] for s in interp.current_state_ids)
        return receipt, state[0] if len(state) == 1 else state, dict(interp.context)

    try:
        receipt, state, context = persisted_retry(
            machines.store, f"order:{order_id}", machines.order, send,
            lock=machines.lock, plugins=machines.plugins, create_if_missing=False,
        )  # fmt: skip
    except KeyNotFoundError:
        return problem(404, "not-found", f"no order {order_id}")
    except ConflictError:
        return problem(409, "conflict", "version conflict after the retries")
    status = receipt_to_status(receipt)
    if status != 200:
        name = type(receipt.error).__name__ if receipt.error is not None else "denied"
        if getattr(receipt.error, "type", None):
            name = receipt.error.type
        kind = {"IdempotencyInFlightError": "in-flight",
                "IdempotencyMismatchError": "idempotency-mismatch"}.get(name, name)  # fmt: skip
        return problem(status, kind, str(receipt.error or "refused"))
    if not receipt.changed and not receipt.duplicate:
        return problem(409, "event-not-accepted", f"PAY not accepted in {state}")
    resp = JsonResponse(body(order_id, state, context, key))
    if receipt.duplicate:
        resp["Idempotent-Replayed"] = "true"
    return resp
