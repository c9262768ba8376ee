"""BlockState: what one persisted block knows, and its pure steps.

No I/O and no hooks here: applying an open result, running one event on
the engine (and recording its log entry), and assembling the commit unit.
:class:`~django_xsm.persistence.block.instance.PersistedInstance` adds the
plugin hooks and the generators that yield the block's I/O.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from django_xsm.engine import Event
from django_xsm.exceptions import EventNotAcceptedError, InstanceNotFoundError, XsmError
from django_xsm.persistence.arguments import validate_key
from django_xsm.persistence.audit import AuditPlugin
from django_xsm.persistence.codecs import to_json_ready
from django_xsm.persistence.idempotency import IdempotencyPlugin
from django_xsm.persistence.outbox import Emitted, delivery_id_for
from django_xsm.persistence.records import (
    CommitResult,
    CommitUnit,
    LogEntry,
    OpenResult,
    StoredRecord,
    TimerFailure,
)
from django_xsm.persistence.timer_state import next_due_ms, prune_failures

from .claims import ClaimBook, SendClaim
from .options import BlockOptions, SendOptions

__all__ = ["BlockState"]

_UNSET: Any = object()


class BlockState:
    """The state of one block, from open to commit, and read access to its
    live engine instance: ``value``, ``state_ids``, ``context`` (the live
    dict: changing it in the body is saved), ``status``, ``deadlines``,
    ``matches()``, ``can()`` and ``snapshot()``."""

    def __init__(
        self,
        store: Any,
        key: str,
        machine: Any,
        options: BlockOptions,
        *,
        idempotency: IdempotencyPlugin | None,
        audit: AuditPlugin | None,
    ) -> None:
        self.key = validate_key(key)
        self.store = store
        self.options = options
        self.actor = options.actor
        self.correlation_id = options.correlation_id
        self.clock = options.clock or store.clock
        self.idempotency = idempotency
        self.audit = audit
        self.token = options.lock.new_token()
        self.claims = ClaimBook(
            idempotency, store=store, instance_key=self.key, owner=secrets.token_hex(12)
        )
        if options.idempotency_key is not None:
            self.claims.claim_block(options.idempotency_key, options.fingerprint, options.principal)
        self.record: StoredRecord | None = None
        self.floor = 0
        self.version = 0
        self.locked = False
        self.receipts: list[Any] = []
        self.committed: CommitResult | None = None
        self.closed = False  # set when the block exits, however it exits
        self.machine: Any = None
        self.instance: Any = None
        self._machine_or_resolver = machine
        self._loaded: Mapping[str, Any] | None = None
        self._log_entries: list[LogEntry] = []
        self._emitted: list[dict[str, Any]] = []  # for the outbox, in order
        self._accepted = 0
        self._changed = False
        self._save_created = False
        self._poisoned: BaseException | None = None
        self._result: Any = _UNSET

    @property
    def value(self) -> Any:
        return self.instance.value

    @property
    def state_ids(self) -> Any:
        return self.instance.state_ids

    @property
    def context(self) -> Any:
        return self.instance.context

    @property
    def status(self) -> str:
        return str(self.instance.status)

    @property
    def deadlines(self) -> Any:
        return self.instance.deadlines

    @property
    def created(self) -> bool:
        """True when this block started a new instance."""
        return self.record is None

    def matches(self, state_id: str) -> bool:
        return bool(self.instance.matches(state_id))

    def can(self, event: Any) -> bool:
        return bool(self.instance.can(event))

    def snapshot(self) -> dict[str, Any]:
        return dict(self.instance.snapshot())

    @property
    def duplicate(self) -> bool:
        """The block's idempotency key finished earlier: sends replay the
        stored receipts, nothing runs and nothing is written."""
        return self.claims.duplicate

    @property
    def replayed_result(self) -> Any:
        """What the first attempt passed to :meth:`set_result` (or None)."""
        return self.claims.replayed_result

    def set_result(self, result: Any) -> None:
        """What a duplicate of this block's idempotency key gets back as
        ``replayed_result`` (default None). JSON values, plus what the
        snapshot codec round-trips exactly (Decimal, datetime, UUID...);
        anything else raises ``TypeError`` naming its path, here."""
        self._result = to_json_ready(result, "$.result")

    def save_created(self) -> None:
        """Commit the instance this block started even if the body sends
        nothing: its initial snapshot, the deadlines its initial states
        armed and the events their entry actions emitted. No effect on a
        block that loaded a stored instance (there is nothing to write);
        the commit's version check makes a concurrent first commit of the
        key win or lose as a whole (``ConflictError``)."""
        self._check_open()
        self._save_created = True

    # --- open ----------------------------------------------------------------

    def _apply_open(self, result: OpenResult) -> None:
        """Claims, lock, record -> live engine instance."""
        self.locked = result.locked
        for outcome in result.claims:
            self.claims.on_block(outcome)
        self.record = result.record
        self.floor = result.floor
        given = self._machine_or_resolver
        if result.record is None and not self.options.create:
            # Before resolving the machine: a resolver keyed by the record's
            # machine (the scanner's) has nothing to resolve from.
            raise InstanceNotFoundError(self.key, machine=str(getattr(given, "id", "") or ""))
        is_machine = hasattr(given, "restore") and hasattr(given, "start")
        self.machine = given if is_machine else given(result.record)
        if result.record is None:
            initial = self.options.context
            self.instance = self.machine.start(
                dict(initial) if initial is not None else None, clock=self.clock
            )
            # what the initial entry actions emitted goes out with the
            # commit that creates the record
            self._keep_emitted(self.instance.last_emitted)
        else:
            self.version = result.record.version
            self.instance = self.machine.restore(result.record.snapshot, clock=self.clock)
        # Compare the exit state with the restored one, not the stored
        # bytes: a snapshot migrated from an older machine version is not a
        # change, so a read still writes nothing (the migrated form is saved
        # with the next real change).
        self._loaded = self.instance.snapshot()

    # --- one event -----------------------------------------------------------

    def _check_open(self) -> None:
        if self.instance is None or self.closed:
            raise XsmError(
                f"The persisted block of {self.key!r} is closed",
                hint="send inside the with-block",
            )

    def _check_not_poisoned(self) -> None:
        if self._poisoned is not None:
            raise XsmError(
                f"An earlier event in this block of {self.key!r} failed; nothing will be committed",
                hint="let the exception leave the with-block and retry",
            ) from self._poisoned

    def _run_event(
        self, etype: str, data: dict[str, Any], claim: SendClaim | None, opts: SendOptions
    ) -> Any:
        """Run one event on the engine and record what to commit."""
        # Redact (and so validate) the payload before the engine runs: a
        # payload the log cannot hold must not leave an applied event
        # without its record.
        logged = self.audit.redact_payload(data) if self.audit is not None else None
        before = self.instance.value if self.audit is not None else None
        strict = self.options.strict if opts.strict is None else opts.strict
        try:
            # one Event, not keywords: a payload member named 'strict' is payload
            receipt = self.instance.send(Event(etype, data), strict=strict)
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
        if not receipt.accepted:
            return receipt
        self._accepted += 1
        self._changed = self._changed or bool(receipt.changed)
        if receipt.emitted:
            self._keep_emitted(receipt.emitted)
        if logged is not None:
            self._log_entries.append(
                LogEntry(
                    event_type=etype,
                    payload=logged,
                    actor=self.actor if opts.actor is None else opts.actor,
                    reason=opts.reason,
                    from_state=before,
                    to_state=receipt.value,
                    idempotency_key=self._idempotency_key_of(claim),
                    correlation_id=self.correlation_id
                    if opts.correlation_id is None
                    else opts.correlation_id,
                    timestamp_ms=self.clock(),
                )
            )
        return receipt

    def _keep_emitted(self, events: tuple[dict[str, Any], ...]) -> None:
        """Queue emitted events for the commit, in the form the outbox
        stores (Decimal, datetime... tagged like snapshots). An event the
        outbox cannot store poisons the block: its step already ran, so
        committing without the event would lose it."""
        try:
            for event in events:
                path = f"$.emitted[{len(self._emitted)}]"
                self._emitted.append(to_json_ready(event, path))
        except BaseException as exc:
            self._poisoned = exc
            raise

    def _idempotency_key_of(self, claim: SendClaim | None) -> str:
        """The key a logged event ran under: its own, else the block's."""
        if claim is not None:
            return claim.request.idempotency_key
        return self.claims.block.idempotency_key if self.claims.block is not None else ""

    # --- commit --------------------------------------------------------------

    def _commit_unit(self) -> CommitUnit:
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
        current = self.instance.snapshot()
        # A body may also mutate the context directly: that is saved too.
        changed = self._changed or current != self._loaded
        new = self.record is None and (self._accepted > 0 or self._save_created)
        snapshot = current if changed or new else None
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
        commit_id = secrets.token_hex(12)
        return CommitUnit(
            key=self.key,
            commit_id=commit_id,
            expected_version=self.version,
            machine_id=str(self.machine.id),
            machine_version=str(self.machine.version),
            snapshot=snapshot,
            floor=self.floor,
            state_ids=tuple(self.instance.state_ids),
            next_due_ms=next_due_ms(
                self.instance.deadlines, failures if new_failures is None else new_failures
            ),
            timer_failures=new_failures,
            lock_token=self.token,
            release_lock=self.locked,
            marks=tuple(marks),
            releases=tuple(releases),
            log_entries=tuple(self._log_entries),
            emitted=tuple(
                Emitted(delivery_id_for(commit_id, i), event)
                for i, event in enumerate(self._emitted)
            )
            if snapshot is not None
            else (),
        )
