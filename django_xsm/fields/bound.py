"""``order.status``: a row's statechart, bound to the row (like ``FieldFile``).

It compares equal to the state column's string and reads and sends through
the Redis-held instance::

    order.status == "cart"; str(order.status)               # the column, no I/O
    order.status.value, .context, .matches("cart"), .can("PAY")   # one load each
    order.status.send("ADD", actor="alice")                  # one persisted() block
    with order.status.open(actor="alice") as block:          # several events, one commit
        block.send("ADD"); block.send("PAY")

Every commit moves the row forward (the block is handed the row's
:class:`~django_xsm.fields.projection.RowWriter`), and so does every read
that finds Redis ahead of the row. A bound value loads once;
:meth:`BoundStatechart.refresh` loads again.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from django.db import models, router
from django.urls import reverse

from django_xsm import backend, conf
from django_xsm.engine import Machine, to_event
from django_xsm.exceptions import InstanceNotFoundError, UnsavedInstanceError
from django_xsm.managers import checked_event
from django_xsm.persistence import aretry_on_conflict, retry_on_conflict
from django_xsm.persistence.idempotency import event_fingerprint
from django_xsm.persistence.locks import LockStrategy
from django_xsm.registry import machines

from .events import AvailableEvent, available_events
from .keys import FieldSpec, instance_key
from .projection import (
    RowMove,
    RowWriter,
    aadvance_row,
    advance_row,
    field_move,
    project_value,
)

if TYPE_CHECKING:
    from django_xsm.managers import InstanceView
    from django_xsm.registry import MachineEntry

__all__ = ["AvailableEvent", "BoundStatechart", "initial_column"]

_UNLOADED: Any = object()


def initial_column(machine_name: str) -> str:
    """The state column of a row whose statechart has no commit yet: the
    machine's initial state (computed purely: no action runs)."""
    entry = machines.get(machine_name)
    if entry is None:
        return ""  # the system check reports the unknown machine
    return _initial_column_of(entry.machine)


@functools.lru_cache(maxsize=64)
def _initial_column_of(machine: Machine) -> str:
    # Once per compiled machine (a settings change compiles new ones): every
    # new row asks twice (its default, then its INSERT).
    return project_value(machine.initial_snapshot(now=0).snapshot["value"])


class BoundStatechart:
    """The statechart of one row (see the module docstring)."""

    __slots__ = ("_initial", "_view", "field", "row")

    def __init__(self, row: models.Model, field: FieldSpec) -> None:
        self.row = row
        self.field = field
        self._view: Any = _UNLOADED
        self._initial: Any = None

    # --- the column: no I/O --------------------------------------------------------

    @property
    def column(self) -> str:
        """The projected state the row holds (``"cart"``, ``"shipping.packed"``)."""
        return str(self.row.__dict__.get(self.field.attname, ""))

    @property
    def row_version(self) -> int:
        """The Redis version the row's column was projected from."""
        return int(self.row.__dict__.get(self.field.version_attname, 0) or 0)

    def __str__(self) -> str:
        return self.column

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BoundStatechart):
            return self.column == other.column
        if isinstance(other, str):
            return self.column == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.column)

    def __bool__(self) -> bool:
        return bool(self.column)

    def __repr__(self) -> str:
        return f"<BoundStatechart {self.field.machine_name} {self.column!r} v{self.row_version}>"

    # --- the Redis instance ------------------------------------------------------

    @property
    def key(self) -> str:
        """The instance key (``UnsavedInstanceError`` for a row not saved yet,
        even one whose primary key is set, as UUID and natural keys are)."""
        if self.row._state.adding:
            raise UnsavedInstanceError(type(self.row).__name__, self.field.name, placeholder="")
        return instance_key(self.row, self.field)

    @property
    def stream_url(self) -> str:
        """The path of the instance's live transitions (server-sent events,
        ``/_xsm/stream/<key>``, docs/live.md): ``new EventSource(url)`` in a
        template. No I/O; ``NoReverseMatch`` when ``django_xsm.urls`` is not
        mounted."""
        return reverse("django_xsm:stream", kwargs={"key": self.key})

    @property
    def entry(self) -> MachineEntry:
        return machines[self.field.machine_name]

    def view(self) -> InstanceView | None:
        """The stored instance (None before its first commit), loaded once
        per bound value; repairs a row that lags behind it."""
        if self._view is _UNLOADED:
            self.refresh()
        return self._view  # type: ignore[no-any-return]

    def refresh(self) -> BoundStatechart:
        """Load the instance again (one round trip) and repair the row."""
        key = self.key
        try:
            self._view = self.entry.objects.get(key)
        except InstanceNotFoundError:
            self._view = None
        if self._view is not None:
            self._advance(project_value(self._view.value), self._view.version)
        return self

    def _instance(self) -> Any:
        view = self.view()
        if view is not None:
            return view._instance
        if self._initial is None:
            # A fresh start computed purely: reads must not run entry actions.
            machine = self.entry.machine
            self._initial = machine.restore(machine.initial_snapshot(now=0).snapshot)
        return self._initial

    @property
    def value(self) -> Any:
        """The XState state value (``"cart"``, ``{"shipping": "packed"}``)."""
        return self._instance().value

    @property
    def state_ids(self) -> tuple[str, ...]:
        return tuple(self._instance().state_ids)

    @property
    def context(self) -> dict[str, Any]:
        """A copy of the context: changing it changes nothing stored."""
        view = self.view()
        return view.context if view is not None else dict(self._instance().context)

    @property
    def version(self) -> int:
        """The Redis version (0 before the first commit)."""
        view = self.view()
        return view.version if view is not None else 0

    def matches(self, state_id: str) -> bool:
        return bool(self._instance().matches(state_id))

    def can(self, event: Any, /, **payload: Any) -> bool:
        """Would this event be accepted now (guards evaluated, nothing runs)?"""
        return bool(self._instance().can(event, **payload))

    def events(self, *, user: Any = None) -> list[AvailableEvent]:
        """Event types the current state accepts, in the machine's order;
        ``.conditional`` marks those a guard refuses without a payload.
        With ``user``, only those the user may send to this row
        (``PERMISSIONS``, ``django_xsm.fields.events.may_send``)."""
        return available_events(self.entry, self._instance(), user=user, target=self.row)

    def history(self, *, after_seq: int = 0, limit: int | None = None) -> list[Any]:
        """The transition log of this row's instance, oldest first."""
        return list(self.entry.objects.history(self.key, after_seq=after_seq, limit=limit))

    # --- creating ------------------------------------------------------------------

    def create(self) -> bool:
        """Store the row's instance now unless it exists (what the commit of
        the row's INSERT runs: docs/models.md, "When the instance is
        created"); the row moves to its version. True when this call stored
        it, False when the instance was there already. Fenced by the
        commit's version check against a concurrent first send; optimistic
        whatever ``XSM["LOCK"]`` says: a creation never waits."""

        def attempt() -> bool:
            with self.open(lock="optimistic") as block:
                if block.created:
                    block.save_created()
            return block.committed is not None

        return retry_on_conflict(attempt, attempts=1 + conf.get_settings().conflict_retries)

    # --- sending -------------------------------------------------------------------

    @contextlib.contextmanager
    def open(self, **options: Any) -> Iterator[Any]:
        """``with order.status.open(actor=...) as block:`` — one ``persisted()``
        block (options as ``machines[...].objects.open``), handed this row's
        writer: the commit moves the row forward, in the caller's
        transaction, and ``post_transition`` waits for the row's database.
        A block that committed nothing still repairs a row that lagged
        behind what it loaded."""
        key = self.key  # before any I/O: an unsaved row has no key
        with self.entry.objects.open(key, **self._row_options(options)) as block:
            yield block
        self._view = _UNLOADED  # the next read loads what was committed
        if block.committed is None:
            self._advance(project_value(block.value), block.version)

    @contextlib.asynccontextmanager
    async def aopen(self, **options: Any) -> AsyncIterator[Any]:
        """The asyncio twin of :meth:`open`."""
        key = self.key
        async with self.entry.objects.aopen(key, **self._row_options(options)) as block:
            yield block
        self._view = _UNLOADED
        if block.committed is None:
            await self._aadvance(project_value(block.value), block.version)

    def _row_options(self, options: dict[str, Any]) -> dict[str, Any]:
        using = self._database
        writer = RowWriter(self.field, self.row, using, self._committed)
        return {**options, "projection": writer, "database": using}

    def _committed(self, state: str, version: int) -> None:
        """The row's writer moved the row after a commit (see ``_unconfirmed``)."""
        self._set_row(state, version, committed=True)

    def send(self, event: Any, /, **kwargs: Any) -> Any:
        """Send one event in its own block; returns the receipt. Options as
        ``machines[...].objects.send`` (``actor``, ``idempotency_key``,
        ``reason``, ``strict``, ``lock``...); conflicts are retried."""
        opts, send_kwargs, strategy = self._split(event, kwargs)

        def attempt(lock: LockStrategy) -> Any:
            with self.open(**opts, lock=lock) as block:
                return block.send(event, **send_kwargs)

        attempts = 1 + conf.get_settings().conflict_retries
        return retry_on_conflict(attempt, attempts=attempts, lock=strategy)

    async def asend(self, event: Any, /, **kwargs: Any) -> Any:
        """The asyncio twin of :meth:`send`."""
        opts, send_kwargs, strategy = self._split(event, kwargs)

        async def attempt(lock: LockStrategy) -> Any:
            async with self.aopen(**opts, lock=lock) as block:
                return await block.asend(event, **send_kwargs)

        attempts = 1 + conf.get_settings().conflict_retries
        return await aretry_on_conflict(attempt, attempts=attempts, lock=strategy)

    _BLOCK_OPTIONS = ("actor", "idempotency_key", "principal", "strict", "lock", "correlation_id")

    def _split(
        self, event: Any, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], LockStrategy]:
        """Block options, the send's own arguments and the lock strategy; an
        idempotency key is claimed at open (same round trip as the load)
        with the event's fingerprint, as ``objects.send`` does. A reserved
        or unknown event type is refused here, before any I/O."""
        opts = {k: kwargs.pop(k) for k in self._BLOCK_OPTIONS if k in kwargs}
        opts.setdefault("create", True)
        # the payload limit, before any I/O ('reason' is the send's own)
        checked = checked_event(event, {k: v for k, v in kwargs.items() if k != "reason"})
        self.entry.machine.check_sendable(checked.type)
        if opts.get("idempotency_key"):
            normalized = to_event(event, kwargs)  # 'reason' in the fingerprint, as before
            opts["fingerprint"] = event_fingerprint(normalized.type, normalized.data)
        return opts, kwargs, backend.lock_strategy(opts.pop("lock", None))

    # --- the projection ------------------------------------------------------------

    def _fenced(self, version: int) -> bool:
        return version > self.row_version

    def _unconfirmed(self) -> set[str]:
        # Columns this object moved after a commit whose database write may
        # yet roll back with the caller's transaction: the next repair
        # writes them again (the UPDATE is fenced, so that is harmless).
        found: set[str] = self.row.__dict__.setdefault("_xsm_unconfirmed", set())
        return found

    def _set_row(self, state: str, version: int, *, committed: bool = False) -> None:
        if committed:
            self._unconfirmed().add(self.field.attname)
        if not self._fenced(version):
            return
        self.row.__dict__[self.field.attname] = state
        self.row.__dict__[self.field.version_attname] = version

    def _needs_write(self, version: int) -> bool:
        return self._fenced(version) or self.field.attname in self._unconfirmed()

    def _advance(self, state: str, version: int) -> None:
        if not self._needs_write(version):
            return
        advance_row(type(self.row), self.row.pk, **self._columns(state, version))
        self._unconfirmed().discard(self.field.attname)
        self._set_row(state, version)

    async def _aadvance(self, state: str, version: int) -> None:
        if not self._needs_write(version):
            return
        await aadvance_row(type(self.row), self.row.pk, **self._columns(state, version))
        self._unconfirmed().discard(self.field.attname)
        self._set_row(state, version)

    def _columns(self, state: str, version: int) -> RowMove:
        return field_move(self.field, state, version, self._database)

    @property
    def _database(self) -> str:
        return self.row._state.db or router.db_for_write(type(self.row))
