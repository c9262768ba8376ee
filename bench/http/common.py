"""What the three sites share: the request checks and the response body.

``POST /orders/<int:order_id>/pay`` with an ``Idempotency-Key`` header and
``{"amount_cents": N}``; answers 200 with
``{"id", "state", "payments", "paid_cents", "key"}`` (``key`` echoes the
Idempotency-Key so the load generator can tell which keys succeeded), a
replay of the first answer for a repeated key, 4xx/5xx problem JSON
otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.http import HttpRequest, JsonResponse

# a bare token of the IETF draft's characters, 1-255 of them
KEY_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~:/=]{1,255}$")


def problem(status: int, kind: str, detail: str, **extra: Any) -> JsonResponse:
    body = {"type": f"/problems/{kind}", "status": status, "detail": detail, **extra}
    resp = JsonResponse(body, status=status, content_type="application/problem+json")
    if status in (409, 503) and kind in ("conflict", "in-flight", "locked", "unavailable"):
        resp["Retry-After"] = "1"
    return resp


def amount_of(request: HttpRequest) -> int | None:
    try:
        data = json.loads(request.body or b"{}")
    except ValueError:
        return None
    amount = data.get("amount_cents") if isinstance(data, dict) else None
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= 10**9:
        return None
    return amount


def body(order_id: int, state: Any, context: dict[str, Any], key: str) -> dict[str, Any]:
    return {
        "id": order_id,
        "state": state,
        "payments": context["payments"],
        "paid_cents": context["paid_cents"],
        "key": key,
    }
