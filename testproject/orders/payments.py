"""Payment-provider webhooks, signed the Standard Webhooks way.

A delivery carries ``webhook-id`` (unique per event, the same on every
redelivery), ``webhook-timestamp`` (Unix seconds) and ``webhook-signature``
(``v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">``, several may be
space-separated during a secret rotation). The id is the idempotency key:
a redelivered event changes nothing and gets the first answer back.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from django.conf import settings

#: Deliveries older or newer than this are refused (replayed captures).
TOLERANCE_S = 5 * 60


class BadSignature(Exception):
    """The delivery is not from the provider (or too old)."""


def _secret() -> bytes:
    return str(settings.ORDERS_WEBHOOK_SECRET).encode()


def sign(webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value for a delivery."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(_secret(), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify(headers: Any, body: bytes, *, now: float | None = None) -> str:
    """Check a delivery; returns its webhook id or raises BadSignature."""
    webhook_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    given = headers.get("webhook-signature", "").split()
    if not webhook_id or not stamp.isdigit() or not given:
        raise BadSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    current = time.time() if now is None else now
    if abs(current - int(stamp)) > TOLERANCE_S:
        raise BadSignature("timestamp outside the tolerance")
    expected = sign(webhook_id, int(stamp), body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in given):
        raise BadSignature("no matching signature")
    return str(webhook_id)


def delivery(payment_id: str, order_id: str, amount_cents: int) -> tuple[dict[str, str], bytes]:
    """Headers and body of a signed ``payment.succeeded`` delivery (what the
    provider would send; the demo's "simulate payment" button uses it)."""
    body = json.dumps(
        {
            "type": "payment.succeeded",
            "data": {
                "order_id": order_id,
                "payment_id": payment_id,
                "amount_cents": amount_cents,
            },
        }
    ).encode()
    webhook_id = "msg_" + hashlib.sha256(payment_id.encode()).hexdigest()[:24]
    stamp = int(time.time())
    headers = {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(webhook_id, stamp, body),
    }
    return headers, body
