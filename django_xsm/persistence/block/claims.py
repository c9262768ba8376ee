"""The idempotency claims of one block (no I/O; the block yields its claims).

A block holds at most one claim for its own key (given when it opens) and
one per explicitly keyed send. Only an accepted send consumes its key: a
refused one is released at commit and may run again later. At commit,
consumed claims become inbox marks holding the receipts duplicates get
back; the others are released.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.idempotency import (
    EventView,
    IdempotencyPlugin,
    ReplayedReceipt,
    event_fingerprint,
    raise_for_outcome,
    receipt_to_stored,
    validate_idempotency_key,
)
from django_xsm.persistence.records import (
    ClaimOutcome,
    ClaimRequest,
    ClaimStatus,
    InboxMark,
    InboxRelease,
)

__all__ = ["ClaimBook", "SendClaim"]


class SendClaim:
    """A per-send claim this block owns, and what its send did."""

    __slots__ = ("accepted", "receipt", "request")

    def __init__(self, request: ClaimRequest) -> None:
        self.request = request
        self.receipt: Any = None
        self.accepted = False


class ClaimBook:
    """Claims of one block, owned by ``owner``, against ``instance_key``."""

    def __init__(
        self, plugin: IdempotencyPlugin | None, *, store: Any, instance_key: str, owner: str
    ) -> None:
        self.plugin = plugin
        self.instance_key = instance_key
        self.owner = owner
        self.lease_ms = plugin.lease_for(store) if plugin is not None else 0
        self._inbox = plugin.inbox_for(store) if plugin is not None else None
        self.block: ClaimRequest | None = None
        self.duplicate = False  # the block's key finished earlier: replay only
        self.replayed_result: Any = None
        self._replays: list[Any] = []
        self._sends: dict[tuple[str, str], SendClaim] = {}

    def _plugin(self, path: str) -> IdempotencyPlugin:
        if self.plugin is None:
            raise InvalidConfigError(
                f"{path} needs an IdempotencyPlugin in plugins", path="idempotency_key"
            )
        return self.plugin

    @property
    def inbox(self) -> Any:
        """The inbox the claims go to (a block has claims and releases only
        with an IdempotencyPlugin)."""
        self._plugin("A claim")
        return self._inbox

    def claim_block(self, key: str, fingerprint: str, principal: str) -> None:
        """The claim for a key given when the block opens."""
        self._plugin("An idempotency_key")
        validate_idempotency_key(key)
        fingerprint = fingerprint or event_fingerprint("xsm.block", {})
        self.block = self._request(principal, key, fingerprint)

    def on_block(self, outcome: ClaimOutcome) -> None:
        if outcome.status != ClaimStatus.DONE:
            raise_for_outcome(outcome)
            return
        self.duplicate = True
        stored = outcome.receipt if isinstance(outcome.receipt, Mapping) else {}
        self.replayed_result = stored.get("result")
        self._replays = list(stored.get("receipts", ()))

    def replay(self, etype: str, index: int) -> ReplayedReceipt:
        """The receipt the ``index``-th send of the first attempt stored."""
        stored = self._replays[index] if index < len(self._replays) else None
        return ReplayedReceipt.from_stored(stored, event_type=etype)

    def prepare(
        self, etype: str, data: dict[str, Any], key: str
    ) -> ReplayedReceipt | ClaimRequest | None:
        """A replay when this block already consumed ``key``; None when the
        block's own key (claimed at open) covers the send; else the claim to
        send to the inbox."""
        plugin = self._plugin("send(idempotency_key=...)")
        validate_idempotency_key(key)
        if self.block is not None and key == self.block.idempotency_key:
            # The key was claimed with the block: no second claim, and the
            # block's mark (all its receipts) is what a retry replays.
            return None
        fingerprint = event_fingerprint(etype, data)
        scope = plugin.scope_for(EventView(etype, data))
        held = self._sends.get((scope, key))
        if held is not None:
            if held.request.fingerprint != fingerprint:
                raise_for_outcome(ClaimOutcome(ClaimStatus.MISMATCH, held.request))
            if held.accepted:
                stored = receipt_to_stored(held.receipt)
                return ReplayedReceipt.from_stored(stored, event_type=etype)
            # Refused (or raised) earlier in this block: like a refused event
            # of an earlier block, it did not consume its key; run it again.
        return self._request(scope, key, fingerprint)

    def _request(self, scope: str, key: str, fingerprint: str) -> ClaimRequest:
        """A claim of ``key`` in ``scope`` against this block's instance, owned by it."""
        return ClaimRequest(scope, self.instance_key, key, fingerprint, self.owner, self.lease_ms)

    def on_send(self, outcome: ClaimOutcome) -> ReplayedReceipt | SendClaim:
        if outcome.status == ClaimStatus.DONE:
            return ReplayedReceipt.from_stored(outcome.receipt)
        raise_for_outcome(outcome)
        claim = SendClaim(outcome.request)
        self._sends[(outcome.request.scope, outcome.request.idempotency_key)] = claim
        return claim

    @property
    def consumed(self) -> bool:
        """Some keyed send was accepted: its mark must be committed."""
        return any(c.accepted for c in self._sends.values())

    def settle(
        self, *, commits: bool, receipts: list[Any], result: Any
    ) -> tuple[list[InboxMark], list[InboxRelease]]:
        """Marks and releases of a block that commits (or writes nothing)."""
        ttl = self.plugin.ttl_ms if self.plugin is not None else 0
        marks: list[InboxMark] = []
        releases: list[InboxRelease] = []
        for claim in self._sends.values():
            if claim.accepted:
                marks.append(InboxMark(claim.request, receipt_to_stored(claim.receipt), ttl))
            else:
                releases.append(InboxRelease(claim.request))
        if self.block is not None:
            if commits:
                stored = {"receipts": [receipt_to_stored(r) for r in receipts], "result": result}
                marks.append(InboxMark(self.block, stored, ttl))
            else:
                releases.append(InboxRelease(self.block))
        return marks, releases

    def abort_releases(self) -> list[InboxRelease]:
        """Claims to drop when the block fails (nothing was committed)."""
        out = [InboxRelease(c.request) for c in self._sends.values()]
        if self.block is not None and not self.duplicate:
            out.append(InboxRelease(self.block))
        return out
