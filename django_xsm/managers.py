"""``machines[name].objects``: the ORM-style manager of one machine's instances.

::

    from django_xsm.registry import machines

    order = machines["order"].objects.get("order:42")     # read-only view
    order.value, order.state_ids, order.context, order.version, order.updated_at
    with machines["order"].objects.open("order:42", actor="alice") as block:
        block.send("PAY")
    machines["order"].objects.exists("order:42")
    list(machines["order"].objects.keys("order:"))

Every method goes through the process's backend (:mod:`django_xsm.backend`)
with the settings-driven plugins and lock; blocks raise the entry's
``DoesNotExist`` and log strict refusals like accepted transitions.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, TypedDict, Unpack

from django.core.exceptions import ObjectDoesNotExist

from django_xsm import backend, conf
from django_xsm.backend.context import request_actor, request_correlation_id
from django_xsm.backend.transitions import TransitionPlugin, log_refused
from django_xsm.engine import Deadline, Event, Instance, Machine, to_event
from django_xsm.exceptions import EventNotAcceptedError, InstanceNotFoundError, UnknownEventError
from django_xsm.persistence import Plugin, apersisted, persisted, retry_on_conflict
from django_xsm.persistence.arguments import check_log_read
from django_xsm.persistence.block import PersistedInstance
from django_xsm.persistence.idempotency import event_fingerprint
from django_xsm.persistence.locks import LockStrategy
from django_xsm.persistence.payloads import check_payload
from django_xsm.persistence.records import StoredRecord, TimerFailure, TransitionRecord

__all__ = [
    "InstanceDoesNotExist",
    "InstanceManager",
    "InstanceView",
    "NamedMachine",
    "OpenOptions",
    "checked_event",
]


class NamedMachine(Protocol):
    """What a manager needs of its registry entry
    (:class:`django_xsm.registry.MachineEntry`)."""

    @property
    def name(self) -> str: ...

    @property
    def machine(self) -> Machine: ...

    @property
    def writers(self) -> tuple[Plugin, ...]: ...


class InstanceDoesNotExist(InstanceNotFoundError, ObjectDoesNotExist):
    """No instance of this machine under this key (``Model.DoesNotExist``
    style: also an ``ObjectDoesNotExist`` and an ``InstanceNotFoundError``,
    which ``@stateful_view`` and ``XsmMiddleware`` answer with 404)."""


@dataclass(frozen=True, slots=True)
class InstanceView:
    """A read-only, detached view of one stored instance.

    ``context`` is a private deep copy: changing it changes nothing stored.
    ``updated_at`` is an aware UTC datetime; ``deadlines`` are the pending
    ``after`` timers; ``timer_failures`` the retry/dead-letter bookkeeping.
    """

    machine: str
    key: str
    value: Any
    state_ids: tuple[str, ...]
    context: dict[str, Any]
    status: str
    version: int
    machine_version: str
    updated_at: _dt.datetime
    deadlines: tuple[Deadline, ...]
    timer_failures: Mapping[str, TimerFailure]
    _instance: Instance = field(repr=False, compare=False)

    def matches(self, state_id: str) -> bool:
        """True when ``state_id`` (with or without the machine id) is active."""
        return self._instance.matches(state_id)

    def can(self, event: object) -> bool:
        """True when ``event`` would be accepted now (guards evaluated)."""
        return self._instance.can(event)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: value, state ids, context, status, version, updated
        at (ISO 8601) and deadlines (state, event, due at)."""
        return {
            "machine": self.machine,
            "key": self.key,
            "value": self.value,
            "state_ids": list(self.state_ids),
            "context": copy.deepcopy(self.context),
            "status": self.status,
            "version": self.version,
            "machine_version": self.machine_version,
            "updated_at": self.updated_at.isoformat(),
            "deadlines": [
                {
                    "state": d.state_id,
                    "event": d.event_type,
                    "due_at": _dt.datetime.fromtimestamp(d.due_ms / 1000, tz=_dt.UTC).isoformat(),
                }
                for d in self.deadlines
            ],
        }


# --- blocks that speak Django ------------------------------------------------------


class OpenOptions(TypedDict, total=False):
    """The keyword options of :meth:`InstanceManager.open` and ``aopen``."""

    actor: str
    idempotency_key: str | None
    fingerprint: str
    principal: str
    create: bool
    strict: bool
    lock: str | LockStrategy | None
    correlation_id: str
    context: Mapping[str, Any] | None
    projection: Plugin | None
    database: str


_ExcType = type[BaseException] | None
_Tb = TracebackType | None


@contextlib.contextmanager
def _django_not_found(entry: NamedMachine) -> Iterator[None]:
    """Raise the entry's ``DoesNotExist`` for a missing instance."""
    try:
        yield
    except InstanceDoesNotExist:
        raise
    except InstanceNotFoundError as exc:
        raise InstanceDoesNotExist(exc.key or "", machine=entry.name) from None


def _log_strict_refusal(
    entry: NamedMachine, block: PersistedInstance, exc: BaseException | None
) -> None:
    # One log line per refused event, like accepted ones (strict refusals
    # commit nothing, so the transition plugin never sees them finish).
    if not isinstance(exc, EventNotAcceptedError):
        return
    log_refused(
        machine=entry.name,
        key=block.key,
        event=exc.event_type,
        # an unknown type is refused whatever the state: log where it was sent
        state=block.value if isinstance(exc, UnknownEventError) else exc.value,
        version=block.version,
        actor=block.actor,
        correlation_id=block.correlation_id,
        reason=exc.reason,
        guards=exc.guards,
    )


class _Block(persisted):
    """``persisted()`` that raises the entry's DoesNotExist and logs strict
    refusals."""

    def __init__(self, entry: NamedMachine, key: str, **options: Any) -> None:
        super().__init__(**options, key=key, machine=entry.machine)
        self.entry = entry

    def __enter__(self) -> PersistedInstance:
        with _django_not_found(self.entry):
            return super().__enter__()

    def __exit__(self, exc_type: _ExcType, exc: BaseException | None, tb: _Tb) -> None:
        super().__exit__(exc_type, exc, tb)
        _log_strict_refusal(self.entry, self.block, exc)


class _AsyncBlock(apersisted):
    """The asyncio twin of :class:`_Block`."""

    def __init__(self, entry: NamedMachine, key: str, **options: Any) -> None:
        super().__init__(**options, key=key, machine=entry.machine)
        self.entry = entry

    async def __aenter__(self) -> PersistedInstance:
        with _django_not_found(self.entry):
            return await super().__aenter__()

    async def __aexit__(self, exc_type: _ExcType, exc: BaseException | None, tb: _Tb) -> None:
        # the transition plugin's aafter_commit sends the signals
        await super().__aexit__(exc_type, exc, tb)
        _log_strict_refusal(self.entry, self.block, exc)


def checked_event(event: object, payload: Mapping[str, Any] | None = None) -> Event:
    """``event`` (with keyword ``payload``) as an engine ``Event`` whose
    payload is within ``XSM['MAX_PAYLOAD_BYTES']``: what a send that opens
    its own block checks before the open's round trip (the block checks
    every send again, whoever opened it)."""
    found = to_event(event, payload)
    check_payload(found.type, found.data, conf.get_settings().max_payload_bytes)
    return found


# --- the manager -----------------------------------------------------------------------


class InstanceManager:
    """``machines[name].objects``: instances of one machine in the store
    (see the module docstring); methods starting with ``a`` are the asyncio
    twins."""

    def __init__(self, entry: NamedMachine) -> None:
        self.entry = entry
        self.DoesNotExist = InstanceDoesNotExist

    def _options(
        self, store: Any, plugins: tuple[Any, ...], options: OpenOptions
    ) -> dict[str, Any]:
        lock = backend.lock_strategy(options.get("lock"))
        given: dict[str, Any] = dict(options)
        # The one writer of the model projection: the row's own when the
        # caller has the row at hand (the model field), else the writers
        # the registry holds for rows this machine's keys name.
        projection = given.pop("projection", None)
        writers = (projection,) if projection is not None else self.entry.writers
        database: str | None = given.pop("database", None)
        if database is not None:
            # post_transition waits for the commit of that database
            plugins = tuple(
                p.using(database) if isinstance(p, TransitionPlugin) else p for p in plugins
            )
        return {
            **given,
            # inside a request, the request's id and user (as @stateful_view
            # blocks have), unless the caller names its own
            "correlation_id": options.get("correlation_id") or request_correlation_id.get(),
            "actor": options.get("actor") or request_actor(),
            "store": store,
            # the writers first: the row has moved when post_commit and
            # post_transition are sent
            "plugins": (*writers, *plugins),
            "lock": lock,
            "max_payload_bytes": conf.get_settings().max_payload_bytes,
        }

    def open(self, key: str, **options: Unpack[OpenOptions]) -> persisted:
        """A ``persisted()`` block on ``key`` (``with ... as block:``).

        Options (:class:`OpenOptions`) are those of ``persisted()``; the
        ``idempotency_key`` is claimed in the load's round trip (a finished
        duplicate opens with ``block.duplicate`` True and
        ``block.replayed_result``). ``projection``: the writer of the model
        row this block commits for (default: the registry's writers of the
        rows this machine's keys name); ``database``: the database whose
        transaction ``post_transition`` waits for (default ``"default"``).
        ``create=False`` raises :class:`InstanceDoesNotExist` for a missing
        key. With ``lock="adaptive"`` one block takes no lock (the conflict
        retry of ``send()`` and ``@stateful_view`` queues after a conflict).
        """
        found = backend.get_backend()
        return _Block(self.entry, key, **self._options(found.store, found.plugins, options))

    def aopen(self, key: str, **options: Unpack[OpenOptions]) -> apersisted:
        """``async with objects.aopen(key) as block:`` — see :meth:`open`.
        Call it from a coroutine (it binds to the running event loop)."""
        found = backend.get_async_backend()
        return _AsyncBlock(self.entry, key, **self._options(found.store, found.plugins, options))

    def send(
        self,
        key: str,
        event: Any,
        /,
        *,
        actor: str = "",
        idempotency_key: str | None = None,
        principal: str = "",
        create: bool = False,
        strict: bool = False,
        lock: str | LockStrategy | None = None,
        reason: str = "",
        correlation_id: str = "",
        **payload: Any,
    ) -> Any:
        """Open ``key``, send one event, commit; returns the receipt (a
        ``ReplayedReceipt`` for a finished ``idempotency_key``). Version
        conflicts are retried ``CONFLICT_RETRIES`` times (the event runs
        again on a fresh load each time). A reserved (``xstate.*``,
        ``xsm.*``) or unknown event type is refused before any I/O
        (``Machine.check_sendable``)."""
        normalised = checked_event(event, payload)  # before any I/O
        etype, data = normalised.type, normalised.data
        self.entry.machine.check_sendable(etype)
        fingerprint = event_fingerprint(etype, data) if idempotency_key else ""

        def attempt(strategy: LockStrategy) -> Any:
            with self.open(
                key,
                actor=actor,
                idempotency_key=idempotency_key,
                fingerprint=fingerprint,
                principal=principal,
                create=create,
                strict=strict,
                lock=strategy,
                correlation_id=correlation_id,
            ) as block:
                return block.send(etype, reason=reason, **data)

        return retry_on_conflict(
            attempt,
            attempts=1 + conf.get_settings().conflict_retries,
            lock=backend.lock_strategy(lock),
        )

    def owns(self, record: StoredRecord) -> bool:
        """False when ``record`` belongs to another machine (a record that
        names no machine is taken as this one's)."""
        return record.owner in ("", self.entry.machine.id)

    def _view(self, key: str, record: StoredRecord | None) -> InstanceView:
        machine = self.entry.machine
        if record is None or not self.owns(record):
            raise InstanceDoesNotExist(key, machine=self.entry.name)
        instance = machine.restore(record.snapshot)
        return InstanceView(
            machine=self.entry.name,
            key=key,
            value=instance.value,
            state_ids=tuple(instance.state_ids),
            context=copy.deepcopy(dict(instance.context)),
            status=str(instance.status),
            version=record.version,
            machine_version=record.machine_version,
            updated_at=record.updated_at,
            deadlines=tuple(instance.deadlines),
            timer_failures=dict(record.timer_failures),
            _instance=instance,
        )

    def get(self, key: str) -> InstanceView:
        """The stored instance (one round trip); raises
        :class:`InstanceDoesNotExist` when absent or of another machine."""
        return self._view(key, backend.get_store().load(key))

    async def aget(self, key: str) -> InstanceView:
        return self._view(key, await backend.get_async_backend().store.load(key))

    def exists(self, key: str) -> bool:
        try:
            self.get(key)
        except InstanceDoesNotExist:
            return False
        return True

    async def aexists(self, key: str) -> bool:
        try:
            await self.aget(key)
        except InstanceDoesNotExist:
            return False
        return True

    def _check_owner(self, key: str) -> None:
        # Like get(): another machine's instance is not this manager's to
        # erase or read (one round trip; a missing record passes, so the
        # log of a deleted instance stays reachable).
        record = backend.get_store().load(key)
        if record is not None and not self.owns(record):
            raise InstanceDoesNotExist(key, machine=self.entry.name)

    def forget(self, key: str) -> dict[str, int]:
        """Erase the instance's record, deadlines, lock and transition log
        (counts per kind). Idempotency receipts expire on their own.
        Raises :class:`InstanceDoesNotExist` for another machine's instance."""
        self._check_owner(key)
        return backend.get_store().forget(key)

    def keys(self, prefix: str = "") -> Iterator[str]:
        """Keys of this machine's instances starting with ``prefix``
        (literally: glob characters are plain characters), in order, paged
        through the store's index (never a full keyspace scan)."""
        return backend.get_store().list_keys(prefix, machine=self.entry.machine.id)

    def page(
        self, prefix: str = "", *, after: str = "", limit: int = 50, state: str | None = None
    ) -> tuple[list[str], str]:
        """One page of keys after the cursor ``after`` and the next cursor
        ('' at the end); ``state`` keeps instances in that full state id."""
        return backend.get_store().list_page(
            prefix, after=after, limit=limit, machine=self.entry.machine.id, state=state
        )

    def history(
        self, key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TransitionRecord]:
        """Transition-log records of ``key`` after ``after_seq``, oldest first
        (:class:`InstanceDoesNotExist` for another machine's instance)."""
        check_log_read(after_seq, limit)  # before the owner's round trip
        self._check_owner(key)
        return backend.get_log().read(key, after_seq=after_seq, limit=limit)

    def latest(self, key: str, count: int = 20) -> list[TransitionRecord]:
        """The newest ``count`` transition-log records, oldest first
        (:class:`InstanceDoesNotExist` for another machine's instance)."""
        self._check_owner(key)
        return backend.get_log().read_last(key, count=count)

    def __repr__(self) -> str:
        return f"<InstanceManager {self.entry.name!r}>"
