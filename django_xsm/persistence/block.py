"""PersistedInstance: what ``with persisted(...) as order`` hands the body.

This module is sans-I/O: it turns the open result into a live engine
instance, runs sends, and assembles the commit unit; the sync and async
drivers in ``runtime.py`` do the store and inbox calls. Keeping the logic
here, once, is what lets ``persisted()`` and ``apersisted()`` behave the
same.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from django_xsm.exceptions import (
    EventNotAcceptedError,
    InstanceNotFoundError,
    XsmError,
)

from .base import system_clock_ms, validate_key
from .claims import ClaimBook, SendClaim
from .codecs import to_json_ready
from .idempotency import ReplayedReceipt
from .locks import LockStrategy, OptimisticLock
from .plugins import Plugin, normalize_event, sort_plugins
from .records import (
    ClaimOutcome,
    ClaimRequest,
    CommitResult,
    CommitUnit,
    InboxRelease,
    LogEntry,
    OpenRequest,
    OpenResult,
    StoredRecord,
    TimerFailure,
    require_text,
)
from .timer_state import next_due_ms, prune_failures
from .view import InstanceReads

# Plugin and normalize_event moved to plugins.py; importable from here too.
logger = logging.getLogger("django_xsm.persistence")

__all__ = ["PersistedInstance", "Plugin", "normalize_event"]

_UNSET: Any = object()
_NO_ACTOR_HINT = "pass the user name or id as a str, or '' for none"


def _check_send_metadata(actor: object, reason: object, correlation_id: object) -> None:
    """A send's audit metadata, checked before its claim round trip and
    before the engine runs (``None`` means "the block's value")."""
    if actor is not None:
        require_text(actor, "actor", hint=_NO_ACTOR_HINT)
    require_text(reason, "reason")
    if correlation_id is not None:
        require_text(correlation_id, "correlation_id")


class PersistedInstance(InstanceReads):
    """A live instance inside a ``persisted()`` block.

    Reads (``value``, ``state_ids``, ``context``, ``status``, ``deadlines``,
    ``matches``, ``can``) go to the engine instance; ``send`` runs events and
    remembers what to commit. Nothing is written before the block exits.
    ``duplicate`` is True when the block was opened with an idempotency key
    that already finished: sends then replay the stored receipts and do
    nothing, and ``replayed_result`` holds what the first attempt stored.
    """

    def __init__(
        self,
        *,
        store: Any,
        key: str,
        machine: Any,
        plugins: tuple[Any, ...] = (),
        lock: LockStrategy | None = None,
        create: bool = True,
        strict: bool = False,
        actor: str = "",
        correlation_id: str = "",
        idempotency_key: str | None = None,
        fingerprint: str = "",
        principal: str = "",
        context: Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
        is_async: bool = False,
    ) -> None:
        self.key = validate_key(key)
        self.store = store
        self._machine_or_resolver = machine
        self.lock = lock or OptimisticLock()
        self.create = create
        self.strict = strict
        # Checked here, before any I/O: the commit stores them in the log.
        self.actor = require_text(actor, "actor", hint=_NO_ACTOR_HINT)
        self.correlation_id = require_text(correlation_id, "correlation_id")
        self._initial_context = context
        self._is_async = is_async
        self.clock: Callable[[], int] = clock or getattr(store, "clock", None) or system_clock_ms
        self.idempotency, self.audit, self.hooks = sort_plugins(plugins)
        self.token = self.lock.new_token()
        self.owner = secrets.token_hex(12)
        self.claims = ClaimBook(
            self.idempotency, store=store, instance_key=self.key, owner=self.owner
        )
        if idempotency_key is not None:
            self.claims.claim_block(idempotency_key, fingerprint, principal)
        self.record: StoredRecord | None = None
        self.floor = 0
        self.version = 0
        self.locked = False
        self.receipts: list[Any] = []
        self.committed: CommitResult | None = None
        self.closed = False  # set when the block exits, however it exits
        self._log_entries: list[LogEntry] = []
        self._accepted = 0
        self._changed = False
        self._poisoned: BaseException | None = None
        self._result: Any = _UNSET
        self._loaded_snapshot: Mapping[str, Any] | None = None
        self.machine: Any = None
        self.instance: Any = None
        self.driver: Any = None  # set by persisted()/apersisted() at open

    @property
    def block_claim(self) -> ClaimRequest | None:
        """The claim of the idempotency key given when the block opened."""
        return self.claims.block

    @property
    def duplicate(self) -> bool:
        """The block's idempotency key finished earlier: sends replay the
        stored receipts, nothing runs and nothing is written."""
        return self.claims.duplicate

    @property
    def replayed_result(self) -> Any:
        """What the first attempt passed to :meth:`set_result` (or None)."""
        return self.claims.replayed_result

    # --- open ----------------------------------------------------------------

    def open_request(self, *, with_claims: bool) -> OpenRequest:
        claims = (self.block_claim,) if with_claims and self.block_claim else ()
        return OpenRequest(
            key=self.key,
            lock_token=self.token,
            lock_ttl_ms=self.lock.ttl_ms or int(getattr(self.store, "lock_ttl_ms", 30_000)),
            claims=claims,
        )

    def on_opened(self, result: OpenResult) -> None:
        """Apply the open result: claims, lock, record → live instance."""
        self.locked = result.locked
        for outcome in result.claims:
            self.on_block_claim(outcome)
        self.record = result.record
        self.floor = result.floor
        if result.record is None and not self.create:
            # Before resolving the machine: a resolver keyed by the record's
            # machine (the scanner's) has nothing to resolve from.
            given = self._machine_or_resolver
            raise InstanceNotFoundError(self.key, machine=str(getattr(given, "id", "") or ""))
        self.machine = self._resolve_machine(result.record)
        if result.record is None:
            self.instance = self.machine.start(
                dict(self._initial_context) if self._initial_context is not None else None,
                clock=self.clock,
            )
            self._loaded_snapshot = self.instance.snapshot()
        else:
            self.version = result.record.version
            self.instance = self.machine.restore(result.record.snapshot, clock=self.clock)
            # Compare the exit state with the restored one, not the stored
            # bytes: a snapshot migrated from an older machine version is
            # not a change, so a read still writes nothing (the migrated
            # form is saved with the next real change).
            self._loaded_snapshot = self.instance.snapshot()

    def on_block_claim(self, outcome: ClaimOutcome) -> None:
        self.claims.on_block(outcome)

    def _resolve_machine(self, record: StoredRecord | None) -> Any:
        m = self._machine_or_resolver
        if hasattr(m, "restore") and hasattr(m, "start"):
            return m
        return m(record)

    def set_result(self, result: Any) -> None:
        """What a duplicate of this block's idempotency key gets back as
        ``replayed_result`` (default None). JSON values, plus what the
        snapshot codec round-trips exactly (Decimal, datetime, UUID...);
        anything else raises ``TypeError`` naming its path, here."""
        self._result = to_json_ready(result, "$.result")

    # --- sending -------------------------------------------------------------

    def send(
        self,
        event: object,
        /,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
        reason: str = "",
        correlation_id: str | None = None,
        strict: bool | None = None,
        **payload: Any,
    ) -> Any:
        """Send one event; returns the engine receipt (or, for a duplicate
        idempotency key, the first attempt's :class:`ReplayedReceipt`).

        ``idempotency_key``: process this event at most once (needs an
        IdempotencyPlugin). ``actor``/``reason``/``correlation_id`` go to
        the transition log. ``strict`` overrides the block's strictness.
        """
        if self.driver is None:
            raise XsmError(f"{self.key!r} is not open", hint="use it inside 'with persisted(...)'")
        _check_send_metadata(actor, reason, correlation_id)
        return self.driver.send(
            event,
            idempotency_key=idempotency_key,
            actor=actor,
            reason=reason,
            correlation_id=correlation_id,
            strict=strict,
            **payload,
        )

    async def asend(self, event: object, /, **kwargs: Any) -> Any:
        """Awaitable :meth:`send`; needed inside ``apersisted()`` for a key
        that was not known at open."""
        if self.driver is None:
            raise XsmError(
                f"{self.key!r} is not open", hint="use it inside 'async with apersisted(...)'"
            )
        _check_send_metadata(
            kwargs.get("actor"), kwargs.get("reason", ""), kwargs.get("correlation_id")
        )
        return await self.driver.asend(event, **kwargs)

    def prepare_send(
        self, event: object, payload: Mapping[str, Any], idempotency_key: str | None
    ) -> tuple[str, dict[str, Any], Any]:
        """Normalise the event; returns (type, payload, step) where step is
        None, a ReplayedReceipt to return as is, or a ClaimRequest the
        driver must send to the inbox before :meth:`run`."""
        if self.instance is None or self.closed:
            raise XsmError(
                f"The persisted block of {self.key!r} is closed",
                hint="send inside the with-block",
            )
        etype, data = normalize_event(event, payload)
        if self.duplicate:
            receipt = self.claims.replay(etype, len(self.receipts))
            self.receipts.append(receipt)
            return etype, data, receipt
        if idempotency_key is None:
            return etype, data, None
        return etype, data, self.claims.prepare(etype, data, idempotency_key)

    def on_send_claim(self, outcome: ClaimOutcome) -> ReplayedReceipt | SendClaim:
        return self.claims.on_send(outcome)

    def run(
        self,
        etype: str,
        data: dict[str, Any],
        claim: SendClaim | None,
        *,
        actor: str | None,
        reason: str,
        correlation_id: str | None,
        strict: bool | None,
    ) -> Any:
        if self._poisoned is not None:
            raise XsmError(
                f"An earlier event in this block of {self.key!r} failed; nothing will be committed",
                hint="let the exception leave the with-block and retry",
            ) from self._poisoned
        for hook in self.hooks:
            hook.before_send(self, etype, data)
        # Redact (and so validate) the payload before the engine runs: a
        # payload the log cannot hold must not leave an applied event
        # without its record.
        logged = self.audit.redact_payload(data) if self.audit is not None else None
        before = self.instance.value if self.audit is not None else None
        try:
            receipt = self.instance.send(
                etype, strict=self.strict if strict is None else strict, **data
            )
        except EventNotAcceptedError as exc:
            exc.key = self.key
            raise
        except BaseException as exc:  # an action or guard raised mid-step
            self._poisoned = exc
            raise
        self.receipts.append(receipt)
        if claim is not None:
            claim.receipt = receipt
            claim.accepted = bool(receipt.accepted)
        if receipt.accepted:
            self._accepted += 1
            self._changed = self._changed or bool(receipt.changed)
            if logged is not None:
                self._log_entries.append(
                    LogEntry(
                        event_type=etype,
                        payload=logged,
                        actor=self.actor if actor is None else actor,
                        reason=reason,
                        from_state=before,
                        to_state=receipt.value,
                        idempotency_key=self._idempotency_key_of(claim),
                        correlation_id=self.correlation_id
                        if correlation_id is None
                        else correlation_id,
                        timestamp_ms=self.clock(),
                    )
                )
        for hook in self.hooks:
            hook.after_send(self, etype, receipt)
        return receipt

    def _idempotency_key_of(self, claim: SendClaim | None) -> str:
        """The key a logged event ran under: its own, else the block's."""
        if claim is not None:
            return claim.request.idempotency_key
        return self.claims.block.idempotency_key if self.claims.block is not None else ""

    # --- commit --------------------------------------------------------------

    def build_commit(self) -> CommitUnit:
        """The unit of work of this block (possibly empty)."""
        if self._poisoned is not None:
            raise XsmError(
                f"Not committing {self.key!r}: an event failed inside the block",
                hint="the failing action's exception was caught in the block; "
                "re-raise it or open a new block",
            ) from self._poisoned
        if self.duplicate:
            return CommitUnit(
                key=self.key,
                commit_id="",
                expected_version=self.version,
                machine_id="",
                machine_version="",
                lock_token=self.token,
                release_lock=self.locked,
            )
        snapshot: dict[str, Any] | None = None
        if self._changed:
            snapshot = self.instance.snapshot()
        else:
            current = self.instance.snapshot()
            # A body may also mutate the context directly: that is saved too.
            if current != self._loaded_snapshot or (self.record is None and self._accepted):
                snapshot = current
        failures = self.record.timer_failures if self.record is not None else {}
        new_failures: dict[str, TimerFailure] | None = None
        if snapshot is not None and failures:
            pruned = prune_failures(failures, self.instance.deadlines)
            if pruned != dict(failures):
                new_failures = pruned
        commits = snapshot is not None or bool(self._log_entries) or self.claims.consumed
        marks, releases = self.claims.settle(
            commits=commits,
            receipts=self.receipts,
            result=None if self._result is _UNSET else self._result,
        )
        effective = failures if new_failures is None else new_failures
        return CommitUnit(
            key=self.key,
            commit_id=secrets.token_hex(12),
            expected_version=self.version,
            machine_id=str(self.machine.id),
            machine_version=str(self.machine.version),
            snapshot=snapshot,
            floor=self.floor,
            state_ids=tuple(self.instance.state_ids),
            next_due_ms=next_due_ms(self.instance.deadlines, effective),
            timer_failures=new_failures,
            lock_token=self.token,
            release_lock=self.locked,
            marks=tuple(marks),
            releases=tuple(releases),
            log_entries=tuple(self._log_entries),
        )

    def on_committed(self, result: CommitResult) -> None:
        self.committed = result
        self.version = result.version
        for hook in self.hooks:
            # The commit is durable: an error here must not look like a failed
            # block to the caller (a retry would apply the events twice).
            try:
                hook.after_commit(self, result)
            except Exception:
                logger.exception("after_commit hook %r failed for %r", hook, self.key)

    def abort_releases(self) -> list[InboxRelease]:
        """Claims to drop when the block fails (nothing was committed)."""
        return self.claims.abort_releases()

    def __repr__(self) -> str:
        state = self.instance.value if self.instance is not None else "<not open>"
        return f"<PersistedInstance {self.key!r} v{self.version} {state!r}>"
