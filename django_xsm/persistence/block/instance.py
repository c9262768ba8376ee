"""PersistedInstance: what ``with persisted(...) as order`` hands the body,
:class:`Plugin`, the base of the hooks it calls, and the plugins every
block of the process gets (:func:`add_process_plugin`).

The block's logic is written here once, as generators composed of the
store's operations (``StoreOps`` in :mod:`django_xsm.persistence.base`):
:meth:`PersistedInstance.open_op`, the send inside
:meth:`~PersistedInstance.send`, and :meth:`PersistedInstance.close_op`.
The store's driver runs each in one loop (see :mod:`.drivers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from django_xsm.engine import to_event
from django_xsm.engine.events import reserved_namespace
from django_xsm.exceptions import (
    ConflictError,
    InvalidConfigError,
    InvalidEventError,
    UnknownEventError,
    XsmError,
    brief,
)
from django_xsm.persistence.audit import AuditPlugin
from django_xsm.persistence.base import StoreOp, retry_after_seconds
from django_xsm.persistence.idempotency import IdempotencyPlugin, ReplayedReceipt
from django_xsm.persistence.locks import queue_for_lock
from django_xsm.persistence.observers import NO_OBSERVATION, Registry, notify, observed
from django_xsm.persistence.payloads import check_payload
from django_xsm.persistence.records import (
    ClaimOutcome,
    ClaimRequest,
    CommitResult,
    CommitUnit,
    InboxRelease,
    OpenRequest,
    OpenResult,
    StoredRecord,
)

from .claims import SendClaim
from .options import BlockOptions, SendOptions
from .state import BlockState

logger = logging.getLogger("django_xsm.persistence")

__all__ = [
    "PersistedInstance",
    "Plugin",
    "add_process_plugin",
    "process_plugins",
    "remove_process_plugin",
    "sort_plugins",
]

_SEND_OPTIONS = tuple(f.name for f in dataclasses.fields(SendOptions))


#: What a block enters around a phase when none of its plugins observes it.
NO_PHASE = NO_OBSERVATION


class Plugin:
    """Base for custom plugins: synchronous hooks, no I/O expected.

    ``on_load`` and ``before_send`` may raise to refuse the block or the
    event. The errors of ``after_commit``, ``aafter_commit`` (its changes
    are durable) and of the observer hooks ``on_lock_busy``, ``phase`` and
    ``on_replay`` are logged, never raised; a block calls ``phase`` and
    ``on_replay`` only on plugins that override them, decided when the
    block is built.
    """

    def on_load(self, block: PersistedInstance, record: StoredRecord | None) -> None:
        """Called once per block when it holds its instance, before the body
        runs (also for blocks that send nothing): ``record`` is what was
        loaded, None for a new instance (``block.duplicate`` tells a replayed
        block). Raising refuses the block: nothing is written, claims and
        lock are released."""

    def before_send(
        self, block: PersistedInstance, event_type: str, payload: Mapping[str, Any]
    ) -> None:
        """Called before the engine sees the event; raising refuses it."""

    def after_send(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        """Called after the engine processed the event."""

    def after_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        """Called once the block's changes are durable."""

    def on_lock_busy(self, block: PersistedInstance, busy_ms: int) -> None:
        """Called each time an open of a pessimistic block finds the lock
        held (``busy_ms``: what the holder's lease has left), before it
        waits for the release."""

    async def aafter_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        """Awaited by ``apersisted()`` after :meth:`after_commit`, on the
        event loop: the place for work that must not block it (async
        receivers, async I/O). Errors are logged, never raised."""

    def phase(
        self, block: PersistedInstance, name: str, event_type: str
    ) -> AbstractContextManager[None]:
        """Around phase ``name``: ``"open"`` (claims known at open, lock,
        load, ``on_load``), ``"send"`` (one per ``send()`` / ``asend()`` /
        ``send_reserved()`` / ``asend_reserved()``: its claim,
        ``before_send``, the engine, ``after_send``; ``event_type`` is the
        event's type, else ``""``) and ``"commit"`` (the exit of a block
        whose body did not raise: the commit, or the release of a block that
        changed nothing, and ``after_commit``). The context manager is exited
        with the exception that ended the phase, which it cannot suppress."""
        return NO_PHASE

    def on_replay(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        """Called when a send returns a
        :class:`~django_xsm.persistence.idempotency.ReplayedReceipt` (its
        key was processed before), inside that send's phase."""


_PROCESS: Registry[Plugin] = Registry(Plugin)

# What every block built from now on gets besides its own (see Registry);
# tracing adds one.
add_process_plugin = _PROCESS.add
remove_process_plugin = _PROCESS.remove
process_plugins = _PROCESS.registered


def sort_plugins(
    plugins: tuple[Any, ...],
) -> tuple[IdempotencyPlugin | None, AuditPlugin | None, list[Plugin]]:
    """``(idempotency, audit, hooks)``: at most one of the first two; the
    hooks end with the process's plugins of a class the block has none of."""
    idempotency: IdempotencyPlugin | None = None
    audit: AuditPlugin | None = None
    hooks: list[Plugin] = []
    for plugin in plugins:
        if isinstance(plugin, IdempotencyPlugin):
            if idempotency is not None:
                raise InvalidConfigError("Only one IdempotencyPlugin per block", path="plugins")
            idempotency = plugin
        elif isinstance(plugin, AuditPlugin):
            if audit is not None:
                raise InvalidConfigError("Only one AuditPlugin per block", path="plugins")
            audit = plugin
        elif isinstance(plugin, Plugin):
            hooks.append(plugin)
        else:
            raise InvalidConfigError(
                f"{type(plugin).__name__} is not a plugin",
                path="plugins",
                hint="use IdempotencyPlugin, AuditPlugin or a Plugin subclass",
            )
    if _PROCESS.items:
        hooks = list(_PROCESS.joined(hooks))
    return idempotency, audit, hooks


def overriding(hooks: Sequence[Plugin], name: str) -> tuple[Plugin, ...]:
    """The hooks whose class overrides :class:`Plugin`'s method ``name``."""
    base = getattr(Plugin, name)
    return tuple(hook for hook in hooks if getattr(type(hook), name) is not base)


def phase_of(
    hooks: tuple[Plugin, ...], block: Any, name: str, event: object = None
) -> AbstractContextManager[None]:
    """What ``block`` enters around phase ``name`` (``event``: the sent
    event, for a ``"send"``): each of ``hooks``' :meth:`Plugin.phase`
    (errors logged, never raised), or a shared null context when none of
    the block's plugins observes phases."""
    if not hooks:
        return NO_PHASE
    etype = _event_type(event) if name == "send" else ""
    return observed(hooks, lambda h: h.phase(block, name, etype), logger, "phase hook", block.key)


def _event_type(event: object) -> str:
    try:
        return to_event(event, None).type
    except Exception:
        return ""  # the send itself raises the error


def _split_options(kwargs: dict[str, Any]) -> tuple[dict[str, Any], SendOptions]:
    """``send()``'s keyword arguments: (the payload, the send's options)."""
    options = {name: kwargs.pop(name) for name in _SEND_OPTIONS if name in kwargs}
    return kwargs, SendOptions(**options)


def _require_reserved(event: object, event_type: str) -> None:
    if not reserved_namespace(event_type):
        raise InvalidEventError(
            f"send_reserved() sends only the reserved xstate.* and xsm.* events, not "
            f"{brief(event_type)}",
            event=event,
            hint="send the chart's own events with send()",
        )


class PersistedInstance(BlockState):
    """A live instance inside a ``persisted()`` block.

    Reads (``value``, ``state_ids``, ``context``, ``status``, ``deadlines``,
    ``matches``, ``can``) go to the engine instance; ``send`` runs events and
    remembers what to commit. Nothing is written before the block exits.
    ``duplicate`` is True when the block was opened with an idempotency key
    that already finished: sends then replay the stored receipts and do
    nothing, and ``replayed_result`` holds what the first attempt stored.
    """

    def __init__(self, store: Any, key: str, machine: Any, options: BlockOptions) -> None:
        idempotency, audit, self.hooks = sort_plugins(options.plugins)
        super().__init__(store, key, machine, options, idempotency=idempotency, audit=audit)
        # decided once: the hooks that observe phases and replays
        self._phase_hooks = overriding(self.hooks, "phase")
        self._replay_hooks = overriding(self.hooks, "on_replay")
        #: the inbox and log the block's operations write (they commit with the store)
        self.inbox = idempotency.inbox_for(store) if idempotency is not None else None
        self.log = audit.log_for(store) if audit is not None else None
        self._driver: Any = None  # the store's driver, once the block opened
        self._async = False

    @property
    def is_async(self) -> bool:
        """True inside ``apersisted()``."""
        return self._async

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
        with phase_of(self._phase_hooks, self, "send", event):
            self._opened("use it inside 'with persisted(...)'")
            opts = SendOptions(idempotency_key, actor, reason, correlation_id, strict)
            return self._run(self._send_op(event, payload, opts))

    async def asend(self, event: object, /, **kwargs: Any) -> Any:
        """Awaitable :meth:`send` (same arguments); needed inside
        ``apersisted()`` for a key that was not known at open."""
        with phase_of(self._phase_hooks, self, "send", event):
            self._opened("use it inside 'async with apersisted(...)'")
            return await self._arun(self._send_op(event, *_split_options(kwargs)))

    def send_reserved(self, event: object, /, **kwargs: Any) -> Any:
        """Send an event of a reserved namespace (``xstate.*``, ``xsm.*``),
        which :meth:`send` refuses; same arguments as :meth:`send`.

        django-xsm's own workers send through it (the timer scanner its
        ``xstate.after.*`` events, the outbox worker ``xsm.outbox.failed``),
        and so may a test of a chart's handling of them. No request path
        calls it, and a ``@stateful_view`` does not offer it. An event type
        outside the reserved namespaces is an ``InvalidEventError``: send
        it with :meth:`send`."""
        with phase_of(self._phase_hooks, self, "send", event):
            self._opened("use it inside 'with persisted(...)'")
            return self._run(self._send_op(event, *_split_options(kwargs), reserved=True))

    async def asend_reserved(self, event: object, /, **kwargs: Any) -> Any:
        """Awaitable :meth:`send_reserved`."""
        with phase_of(self._phase_hooks, self, "send", event):
            self._opened("use it inside 'async with apersisted(...)'")
            return await self._arun(self._send_op(event, *_split_options(kwargs), reserved=True))

    def _opened(self, hint: str) -> None:
        if self._driver is None:
            raise XsmError(f"{self.key!r} is not open", hint=hint)

    def _run(self, op: StoreOp[Any]) -> Any:
        """A ``send()``: on the store's driver; inside ``apersisted()``
        only when it needs no I/O (it cannot block the event loop)."""
        if not self._async:
            return self._driver.run(op, self.key)
        try:
            next(op)
        except StopIteration as stop:
            return stop.value
        op.close()
        raise XsmError(
            "send(idempotency_key=...) inside apersisted() needs a claim round trip",
            hint="use 'await order.asend(...)', or pass the key to apersisted()",
        )

    async def _arun(self, op: StoreOp[Any]) -> Any:
        if self._async:
            return await self._driver.run(op, self.key)
        return self._driver.run(op, self.key)  # a sync block's I/O is blocking anyway

    def _send_op(
        self,
        event: object,
        payload: Mapping[str, Any],
        opts: SendOptions,
        *,
        reserved: bool = False,
    ) -> StoreOp[Any]:
        self._check_open()
        normalized = to_event(event, payload)
        etype, data = normalized.type, normalized.data
        # before any I/O of the send (its claim) and before the engine
        if reserved:
            _require_reserved(event, etype)
        else:
            try:
                self.machine.check_sendable(etype)
            except UnknownEventError as exc:
                exc.key = self.key
                raise
        check_payload(etype, data, self.options.max_payload_bytes)
        if self.duplicate:
            replayed = self.claims.replay(etype, len(self.receipts))
            self.receipts.append(replayed)
            return self._replayed(etype, replayed)
        claim: SendClaim | None = None
        if opts.idempotency_key is not None:
            step = self.claims.prepare(etype, data, opts.idempotency_key)
            if isinstance(step, ReplayedReceipt):
                return self._replayed(etype, step)
            if step is not None:
                got = self.claims.on_send((yield from self._claim_op(step)))
                if isinstance(got, ReplayedReceipt):
                    return self._replayed(etype, got)
                claim = got
        self._check_not_poisoned()
        for hook in self.hooks:
            hook.before_send(self, etype, data)
        receipt = self._run_event(etype, data, claim, opts)
        for hook in self.hooks:
            hook.after_send(self, etype, receipt)
        return receipt

    def _replayed(self, etype: str, receipt: ReplayedReceipt) -> ReplayedReceipt:
        if self._replay_hooks:
            notify(
                self._replay_hooks,
                lambda h: h.on_replay(self, etype, receipt),
                logger,
                "on_replay hook",
                self.key,
            )
        return receipt

    def _claim_op(self, request: ClaimRequest) -> StoreOp[ClaimOutcome]:
        try:
            outcome: ClaimOutcome = yield from self.claims.inbox.claim_op(request)
        except GeneratorExit:
            raise  # closed before the claim was sent: nothing to release
        except BaseException:
            # The claim may have landed before the reply was lost.
            yield from self._release_quietly(InboxRelease(request))
            raise
        return outcome

    # --- open ----------------------------------------------------------------

    def open_op(self, driver: Any, *, is_async: bool = False) -> StoreOp[None]:
        """Open (the block's idempotency claim rides in it; a busy
        pessimistic lock is polled until its timeout) and turn the record
        into a live instance whose sends run on ``driver``, the store's
        (awaited when ``is_async``)."""
        with phase_of(self._phase_hooks, self, "open"):
            try:
                result = yield from self._open_polling()
                self._apply_open(result)
                if (
                    result.lock_held_ms
                    and self.options.lock.yields_to_holder
                    and not self.duplicate
                ):
                    # our commit would lose to the holder: give up before the body runs
                    raise ConflictError(
                        self.key,
                        expected=self.version,
                        actual=self.version,
                        reason="lock",
                        held_lock=False,
                        retry_after_s=retry_after_seconds(result.lock_held_ms),
                    )
                for hook in self.hooks:
                    hook.on_load(self, self.record)
            except BaseException:
                # Whatever failed (a lost reply included), nothing of ours may
                # outlive the failed open: drop the claim and the lock we may hold.
                yield from self._abort_op()
                raise
            self._driver, self._async = driver, is_async

    def _open_polling(self) -> StoreOp[OpenResult]:
        lock = self.options.lock
        request = OpenRequest(
            key=self.key,
            lock_token=self.token,
            lock_ttl_ms=lock.ttl_ms or self.store.lock_ttl_ms,
            claims=(self.claims.block,) if self.claims.block else (),
        )
        return queue_for_lock(
            self.store,
            self.key,
            lock.timeout,
            lambda: self.store.open_op(request),
            lambda result: result.lock_busy_ms if lock.pessimistic else 0,
            functools.partial(self._call_hooks, "on_lock_busy"),
        )

    def _call_hooks(self, name: str, *args: Any) -> None:
        """``hook.<name>(self, *args)`` of every hook: errors logged, never raised."""
        for hook in self.hooks:
            try:
                getattr(hook, name)(self, *args)
            except Exception:
                logger.exception("%s hook %r failed for %r", name, hook, self.key)

    # --- close ---------------------------------------------------------------

    def close_op(self, *, failed: bool) -> StoreOp[None]:
        """Commit the block (or, when the body ``failed``, drop our claims
        and lock). A failed commit releases them too."""
        self.closed = True
        if failed:
            yield from self._abort_op()
            return
        with phase_of(self._phase_hooks, self, "commit"):
            try:
                unit = self._commit_unit()
                result = yield from self._commit_op(unit)
            except BaseException:
                yield from self._abort_op()
                raise
            if result is not None:
                self._on_committed(result)

    def _commit_op(self, unit: CommitUnit) -> StoreOp[CommitResult | None]:
        if _saves_nothing(unit):
            # Nothing to save: drop unconsumed claims and the lock.
            for release in unit.releases:
                yield from self.claims.inbox.release_op(release)
            if unit.release_lock:
                yield from self.store.release_lock_op(self.key, unit.lock_token)
            return None
        result: CommitResult = yield from self.store.commit_op(unit, log=self.log)
        return result

    def _on_committed(self, result: CommitResult) -> None:
        self.committed = result
        self.version = result.version
        # The commit is durable: an error here must not look like a failed
        # block to the caller (a retry would apply the events twice).
        self._call_hooks("after_commit", result)

    def _abort_op(self) -> StoreOp[None]:
        """Best effort: drop our claims and lock; leases expire otherwise.
        Never raises, so the exception that caused the abort is the one the
        caller sees."""
        for release in self.claims.abort_releases():
            yield from self._release_quietly(release)
        if self.options.lock.pessimistic and self.token:
            with contextlib.suppress(Exception):
                yield from self.store.release_lock_op(self.key, self.token)

    def _release_quietly(self, release: InboxRelease) -> StoreOp[None]:
        with contextlib.suppress(Exception):
            yield from self.claims.inbox.release_op(release)

    def __repr__(self) -> str:
        state = self.instance.value if self.instance is not None else "<not open>"
        return f"<PersistedInstance {self.key!r} v{self.version} {state!r}>"


def _saves_nothing(unit: CommitUnit) -> bool:
    """No snapshot, mark or log entry: only claims and a lock to drop."""
    return unit.is_empty or (unit.snapshot is None and not unit.marks and not unit.log_entries)
