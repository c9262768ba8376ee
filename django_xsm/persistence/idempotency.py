"""IdempotencyPlugin: each explicitly keyed event takes effect at most once.

A key is claimed before the event runs. The claim is a short lease owned by
this block (default: the store's lock TTL), separate from the retention of
the finished receipt (default 24 h): a worker that dies between claim and
commit blocks its key only until the lease ends. The mark that finishes the
claim commits together with the snapshot. Keys are only ever explicit
(``send(..., idempotency_key=...)`` or ``persisted(..., idempotency_key=...)``);
no payload field is ever taken as a key, and nothing of this bookkeeping
enters the instance's context.

Claims are scoped to ``(principal, instance key)``: the same key used by
another principal, or against another instance, is a different claim.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import (
    IdempotencyInFlightError,
    IdempotencyKeyError,
    IdempotencyMismatchError,
    InvalidConfigError,
)

from .base import retry_after_seconds
from .codecs import to_json_ready
from .records import ClaimOutcome, ClaimStatus

__all__ = [
    "MAX_IDEMPOTENCY_KEY_LENGTH",
    "EventView",
    "IdempotencyPlugin",
    "ReplayedReceipt",
    "event_fingerprint",
    "raise_for_outcome",
    "validate_idempotency_key",
]

MAX_IDEMPOTENCY_KEY_LENGTH = 255
_PRINTABLE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def validate_idempotency_key(key: object) -> str:
    """1-255 printable ASCII characters, no leading/trailing space."""
    if not isinstance(key, str):
        raise IdempotencyKeyError(f"Idempotency key must be a string, not {type(key).__name__}")
    if not key:
        raise IdempotencyKeyError("Idempotency key is empty")
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise IdempotencyKeyError(
            f"Idempotency key is {len(key)} characters long, over {MAX_IDEMPOTENCY_KEY_LENGTH}"
        )
    if not _PRINTABLE.fullmatch(key):
        raise IdempotencyKeyError(
            "Idempotency key contains control, non-ASCII or surrounding space characters"
        )
    return key


def event_fingerprint(event_type: str, payload: Mapping[str, Any]) -> str:
    """Stable hash of an event's type and payload (key order ignored)."""
    canonical = json.dumps(
        [event_type, to_json_ready(dict(payload), "$.payload")],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ReplayedReceipt:
    """What a duplicate gets back: the first attempt's receipt, verbatim.

    Same attributes as the engine's receipt, plus ``duplicate = True``.
    """

    event_type: str
    accepted: bool
    changed: bool
    value: Any
    status: str
    duplicate: bool = True
    transitions: tuple[Any, ...] = ()

    @classmethod
    def from_stored(cls, data: Any, *, event_type: str = "") -> ReplayedReceipt:
        stored = data if isinstance(data, Mapping) else {}
        return cls(
            event_type=str(stored.get("event_type", event_type)),
            accepted=bool(stored.get("accepted", True)),
            changed=bool(stored.get("changed", False)),
            value=stored.get("value"),
            status=str(stored.get("status", "active")),
        )


def receipt_to_stored(receipt: Any) -> dict[str, Any]:
    """The JSON-ready part of a receipt that duplicates get back."""
    return {
        "event_type": receipt.event_type,
        "accepted": bool(receipt.accepted),
        "changed": bool(receipt.changed),
        "value": receipt.value,
        "status": receipt.status,
    }


def raise_for_outcome(outcome: ClaimOutcome) -> None:
    """Turn IN_FLIGHT / MISMATCH outcomes into their errors."""
    request = outcome.request
    if outcome.status == ClaimStatus.IN_FLIGHT:
        raise IdempotencyInFlightError(
            request.idempotency_key,
            scope=request.scope,
            retry_after_s=retry_after_seconds(outcome.retry_after_ms),
        )
    if outcome.status == ClaimStatus.MISMATCH:
        raise IdempotencyMismatchError(request.idempotency_key, scope=request.scope)


class EventView:
    """What ``principal(event)`` receives: ``.type``, ``.data``, item access."""

    __slots__ = ("data", "type")

    def __init__(self, etype: str, data: dict[str, Any]) -> None:
        self.type = etype
        self.data = data

    def __getitem__(self, name: str) -> Any:
        return self.data[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.data.get(name, default)


#: The longest ttl_s / lease_s (about 31 years): milliseconds of it stay
#: exact, and inf or NaN are refused instead of failing in int().
_MAX_SECONDS = 10**9


class IdempotencyPlugin:
    """Deduplicate explicitly keyed events through ``inbox`` (None: the
    block's store's own, ``store.inbox``; an inbox given must share the
    store's commit).

    ``principal(event)`` names the scope of a per-send key (tenant, account;
    called with the engine ``Event``); a key given when the block opens uses
    the block's ``principal=`` argument instead. ``ttl_s``: how long a
    finished receipt is replayed. ``lease_s``: how long an unfinished claim
    blocks its key (default: the store's lock TTL).
    """

    def __init__(
        self,
        inbox: Any = None,
        *,
        principal: Callable[[Any], str] | None = None,
        ttl_s: float = 86_400,
        lease_s: float | None = None,
    ) -> None:
        for name, value in (("ttl_s", ttl_s), ("lease_s", lease_s)):
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 < value <= _MAX_SECONDS  # also false for NaN
            ):
                raise InvalidConfigError(
                    f"{name} must be a positive number of seconds up to 1e9, got {brief(value)}",
                    path=name,
                )
        self.inbox = inbox
        self.principal = principal or (lambda event: "")
        self.ttl_ms = int(ttl_s * 1000)
        self.lease_ms = int(lease_s * 1000) if lease_s is not None else None

    def lease_for(self, store: Any) -> int:
        return self.lease_ms or int(store.lock_ttl_ms)

    def inbox_for(self, store: Any) -> Any:
        """The inbox a block of ``store`` claims in: ours, else the store's."""
        return self.inbox if self.inbox is not None else store.inbox

    def scope_for(self, event: Any) -> str:
        scope = self.principal(event)
        if not isinstance(scope, str):
            raise InvalidConfigError(
                f"principal() must return a str, got {type(scope).__name__}",
                path="IdempotencyPlugin.principal",
            )
        return scope

    def __repr__(self) -> str:
        return f"IdempotencyPlugin(inbox={self.inbox!r}, ttl_ms={self.ttl_ms})"
