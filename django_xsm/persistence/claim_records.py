"""The records of idempotency claims, shared by every inbox and store.

A claim is the right to run one idempotency key's work once; a mark turns
an owned claim into a finished row holding the receipt duplicates get
back; a release drops an unfinished one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ClaimOutcome", "ClaimRequest", "ClaimStatus", "InboxMark", "InboxRelease"]


class ClaimStatus:
    """What a claim found (string constants, stable across backends)."""

    CLAIMED = "claimed"  # the caller owns the lease now (or already did)
    DONE = "done"  # finished earlier with the same fingerprint: replay
    IN_FLIGHT = "in_flight"  # another owner's lease is still running
    MISMATCH = "mismatch"  # same key, different fingerprint


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """Claim an idempotency key for one instance.

    Rows are addressed by (``scope``, ``instance_key``, ``idempotency_key``):
    a scope is the principal (tenant, account, user) and a key is only ever
    given explicitly. ``lease_ms`` bounds how long a crashed owner can block
    the key; ``ttl_ms`` is how long the finished receipt is kept.
    """

    scope: str
    instance_key: str
    idempotency_key: str
    fingerprint: str
    owner: str
    lease_ms: int


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    status: str
    request: ClaimRequest
    receipt: Any = None  # the stored receipt when DONE
    retry_after_ms: int = 0  # remaining lease when IN_FLIGHT


@dataclass(frozen=True, slots=True)
class InboxMark:
    """Turn an owned claim into a finished row holding ``receipt``.

    ``receipt`` must be JSON-ready; it is returned verbatim to duplicates.
    """

    claim: ClaimRequest
    receipt: Any
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class InboxRelease:
    """Drop an owned, unfinished claim (the event was refused or failed)."""

    claim: ClaimRequest
