"""The machines named in ``XSM['MACHINES']``, each with an ORM-style manager.

::

    from django_xsm.registry import machines

    order = machines["order"].objects.get("order:42")     # read-only view
    order.value, order.state_ids, order.context, order.version, order.updated_at
    with machines["order"].objects.open("order:42", actor="alice") as block:
        block.send("PAY")
    machines["order"].objects.exists("order:42")
    list(machines["order"].objects.keys("order:"))

``XSM['MACHINES']`` maps a name to one of:

* a dotted path to a compiled ``Machine``, to a config dict, or to a
  zero-argument factory returning either;
* a path to a ``.json`` file holding the config (relative paths are taken
  from ``settings.BASE_DIR``);
* a dict ``{"CONFIG": <either of the above>, "LOGIC": "<dotted path to a
  MachineLogic or a factory>", "VERSION": "<machine version>"}``.

Machines compile once, in ``AppConfig.ready`` (and again only when the
settings change). A machine that fails to load does not stop start-up: the
failure is reported by the system check ``xsm.E007`` and raised as
``ImproperlyConfigured`` when that machine is used.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured, ObjectDoesNotExist
from django.utils.module_loading import import_string

from django_xsm import conf, stores
from django_xsm.engine import Machine, MachineLogic, create_machine
from django_xsm.exceptions import (
    EventNotAcceptedError,
    InstanceNotFoundError,
    UnknownMachineError,
    XsmError,
)
from django_xsm.persistence import apersisted, persisted, retry_on_conflict
from django_xsm.persistence.idempotency import event_fingerprint
from django_xsm.persistence.records import StoredRecord, TimerFailure, TransitionRecord

from .transitions import log_refused, send_deferred

__all__ = [
    "InstanceDoesNotExist",
    "InstanceManager",
    "InstanceView",
    "LoadProblem",
    "MachineEntry",
    "Registry",
    "machines",
]

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_SPEC_KEYS = ("CONFIG", "LOGIC", "VERSION")


class InstanceDoesNotExist(InstanceNotFoundError, ObjectDoesNotExist):
    """No instance of this machine under this key (``Model.DoesNotExist``
    style: also an ``ObjectDoesNotExist`` and an ``InstanceNotFoundError``,
    which ``@stateful_view`` and ``XsmMiddleware`` answer with 404)."""


@dataclass(frozen=True, slots=True)
class LoadProblem:
    """Why one entry of ``XSM['MACHINES']`` could not be loaded."""

    name: str
    source: str
    message: str
    hint: str = ""

    @property
    def text(self) -> str:
        """The problem without its hint."""
        return f"XSM['MACHINES'][{self.name!r}] ({self.source}): {self.message}"

    def __str__(self) -> str:
        return f"{self.text} ({self.hint})" if self.hint else self.text


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
    deadlines: tuple[Any, ...]
    timer_failures: Mapping[str, TimerFailure]
    _instance: Any = field(repr=False, compare=False, default=None)

    def matches(self, state_id: str) -> bool:
        """True when ``state_id`` (with or without the machine id) is active."""
        return bool(self._instance.matches(state_id))

    def can(self, event: Any) -> bool:
        """True when ``event`` would be accepted now (guards evaluated)."""
        return bool(self._instance.can(event))

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


def _not_found(entry: MachineEntry, exc: InstanceNotFoundError) -> InstanceDoesNotExist:
    found = InstanceDoesNotExist(exc.key or "", machine=entry.name)
    found.__cause__ = exc
    return found


class _Block(persisted):
    """``persisted()`` that raises the entry's DoesNotExist and logs strict
    refusals (one log line per refused event, like accepted ones)."""

    def __init__(self, entry: MachineEntry, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entry = entry

    def __enter__(self) -> Any:
        try:
            return super().__enter__()
        except InstanceDoesNotExist:
            raise
        except InstanceNotFoundError as exc:
            raise _not_found(self.entry, exc) from None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, EventNotAcceptedError):
            _log_strict_refusal(self.entry, self.block, exc)
        super().__exit__(exc_type, exc, tb)


class _AsyncBlock(apersisted):
    """The asyncio twin of :class:`_Block`; also awaits the deferred
    ``post_transition`` signals once the commit is durable."""

    def __init__(self, entry: MachineEntry, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entry = entry

    async def __aenter__(self) -> Any:
        try:
            return await super().__aenter__()
        except InstanceDoesNotExist:
            raise
        except InstanceNotFoundError as exc:
            raise _not_found(self.entry, exc) from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, EventNotAcceptedError):
            _log_strict_refusal(self.entry, self.block, exc)
        await super().__aexit__(exc_type, exc, tb)
        if exc_type is None:
            await send_deferred(self.block)


def _log_strict_refusal(entry: MachineEntry, block: Any, exc: EventNotAcceptedError) -> None:
    log_refused(
        machine=entry.name,
        key=block.key,
        event=exc.event_type,
        state=exc.value,
        version=block.version,
        actor=block.actor,
        correlation_id=block.correlation_id,
    )


# --- the manager -----------------------------------------------------------------------


class InstanceManager:
    """``machines[name].objects``: instances of one machine in the store.

    Every method uses the process's backend (``django_xsm.stores``) with the
    settings-driven plugins (idempotency, audit, transition signals/logs)
    and lock. Methods starting with ``a`` are the asyncio twins.
    """

    def __init__(self, entry: MachineEntry) -> None:
        self.entry = entry
        self.DoesNotExist = InstanceDoesNotExist

    def _options(
        self, backend: Any, lock: Any, actor: str, correlation_id: str, **kwargs: Any
    ) -> dict[str, Any]:
        return {
            "plugins": backend.plugins,
            "lock": stores.lock_strategy(lock),
            "actor": actor,
            "correlation_id": correlation_id,
            **kwargs,
        }

    def open(
        self,
        key: str,
        *,
        actor: str = "",
        idempotency_key: str | None = None,
        fingerprint: str = "",
        principal: str = "",
        create: bool = True,
        strict: bool = False,
        lock: Any = None,
        correlation_id: str = "",
        context: Mapping[str, Any] | None = None,
    ) -> persisted:
        """A ``persisted()`` block on ``key`` (``with ... as block:``).

        ``idempotency_key`` (+ ``fingerprint`` of the request, ``principal``
        scope) is claimed in the same round trip as the load: a finished
        duplicate opens with ``block.duplicate`` True and
        ``block.replayed_result``. ``create=False`` raises
        :class:`InstanceDoesNotExist` for a missing key. ``lock``:
        ``"optimistic"``, ``"pessimistic"``, a strategy, or None (setting).
        """
        backend = stores.get_backend()
        return _Block(
            self.entry,
            backend.store,
            key,
            self.entry.machine,
            **self._options(
                backend,
                lock,
                actor,
                correlation_id,
                idempotency_key=idempotency_key,
                fingerprint=fingerprint,
                principal=principal,
                create=create,
                strict=strict,
                context=context,
            ),
        )

    def aopen(
        self,
        key: str,
        *,
        actor: str = "",
        idempotency_key: str | None = None,
        fingerprint: str = "",
        principal: str = "",
        create: bool = True,
        strict: bool = False,
        lock: Any = None,
        correlation_id: str = "",
        context: Mapping[str, Any] | None = None,
    ) -> apersisted:
        """``async with objects.aopen(key) as block:`` — see :meth:`open`.
        Call it from a coroutine (it binds to the running event loop)."""
        backend = stores.get_async_backend()
        return _AsyncBlock(
            self.entry,
            backend.store,
            key,
            self.entry.machine,
            **self._options(
                backend,
                lock,
                actor,
                correlation_id,
                idempotency_key=idempotency_key,
                fingerprint=fingerprint,
                principal=principal,
                create=create,
                strict=strict,
                context=context,
            ),
        )

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
        lock: Any = None,
        reason: str = "",
        correlation_id: str = "",
        **payload: Any,
    ) -> Any:
        """Open ``key``, send one event, commit; returns the receipt (a
        ``ReplayedReceipt`` for a finished ``idempotency_key``). Version
        conflicts are retried ``CONFLICT_RETRIES`` times (the event runs
        again on a fresh load each time)."""
        etype = event if isinstance(event, str) else str(dict(event).get("type", ""))
        data = dict(payload) if isinstance(event, str) else {**dict(event), **payload}
        data.pop("type", None)
        fingerprint = event_fingerprint(etype, data) if idempotency_key else ""

        def attempt() -> Any:
            with self.open(
                key,
                actor=actor,
                idempotency_key=idempotency_key,
                fingerprint=fingerprint,
                principal=principal,
                create=create,
                strict=strict,
                lock=lock,
                correlation_id=correlation_id,
            ) as block:
                return block.send(etype, reason=reason, **data)

        return retry_on_conflict(attempt, attempts=1 + conf.get_settings().conflict_retries)

    def _view(self, key: str, record: StoredRecord | None) -> InstanceView:
        machine = self.entry.machine
        if record is None:
            raise InstanceDoesNotExist(key, machine=self.entry.name)
        owner = record.machine_id or str(record.snapshot.get("machine_id", ""))
        if owner and owner != machine.id:
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
        return self._view(key, stores.get_store().load(key))

    async def aget(self, key: str) -> InstanceView:
        return self._view(key, await stores.get_async_backend().store.load(key))

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

    def forget(self, key: str) -> dict[str, int]:
        """Erase the instance's record, deadlines, lock and transition log
        (counts per kind). Idempotency receipts expire on their own."""
        return stores.get_store().forget(key)

    def keys(self, prefix: str = "") -> Iterator[str]:
        """Keys of this machine's instances starting with ``prefix``
        (literally: glob characters are plain characters), in order, paged
        through the store's index (never a full keyspace scan)."""
        return stores.get_store().list_keys(prefix, machine=self.entry.machine.id)

    def page(
        self, prefix: str = "", *, after: str = "", limit: int = 50, state: str | None = None
    ) -> tuple[list[str], str]:
        """One page of keys after the cursor ``after`` and the next cursor
        ('' at the end); ``state`` keeps instances in that full state id."""
        return stores.get_store().list_page(
            prefix, after=after, limit=limit, machine=self.entry.machine.id, state=state
        )

    def history(
        self, key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TransitionRecord]:
        """Transition-log records of ``key`` after ``after_seq``, oldest first."""
        return stores.get_log().read(key, after_seq=after_seq, limit=limit)

    def latest(self, key: str, count: int = 20) -> list[TransitionRecord]:
        """The newest ``count`` transition-log records, oldest first."""
        return stores.get_log().read_last(key, count=count)

    def __repr__(self) -> str:
        return f"<InstanceManager {self.entry.name!r}>"


class MachineEntry:
    """One registered machine: ``name``, the compiled ``machine``, where it
    came from (``source``) and its manager ``objects``."""

    DoesNotExist = InstanceDoesNotExist

    def __init__(self, name: str, machine: Machine, source: str) -> None:
        self.name = name
        self.machine = machine
        self.source = source
        self.objects = InstanceManager(self)

    def __repr__(self) -> str:
        return f"<MachineEntry {self.name!r} machine={self.machine.id!r} from {self.source}>"


# --- loading ----------------------------------------------------------------------------


class _Problem(Exception):
    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def _import(path: str, what: str) -> Any:
    try:
        return import_string(path)
    except ImportError as exc:
        raise _Problem(
            f"cannot import {what} {path!r}: {exc}",
            "give a dotted path 'package.module.attribute' to an importable object",
        ) from exc


def _read_json(path: str) -> Any:
    file = Path(path)
    if not file.is_absolute():
        base = getattr(django_settings, "BASE_DIR", None)
        if base is None:
            raise _Problem(
                f"relative JSON path {path!r} needs settings.BASE_DIR",
                "use an absolute path or define BASE_DIR",
            )
        file = Path(base) / file
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _Problem(f"JSON file {str(file)!r} does not exist", "check the path") from None
    except OSError as exc:
        raise _Problem(f"cannot read {str(file)!r}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Problem(
            f"{str(file)!r} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None


def _resolve(ref: Any, what: str) -> Any:
    if not isinstance(ref, str) or not ref:
        raise _Problem(f"expected a dotted path or a .json path, got {ref!r}")
    found = _read_json(ref) if ref.endswith(".json") else _import(ref, what)
    if not isinstance(found, Machine | Mapping | MachineLogic) and callable(found):
        found = found()
    return found


def _compile(spec: Any) -> tuple[Machine, str]:
    if isinstance(spec, Mapping):
        unknown = [k for k in spec if k not in _SPEC_KEYS]
        if unknown:
            raise _Problem(f"unknown key {unknown[0]!r}", f"use {', '.join(_SPEC_KEYS)}")
        if "CONFIG" not in spec:
            raise _Problem("'CONFIG' is required", "e.g. {'CONFIG': 'orders/order.json'}")
        ref, logic_ref, version = spec["CONFIG"], spec.get("LOGIC"), spec.get("VERSION")
    else:
        ref, logic_ref, version = spec, None, None
    found = _resolve(ref, "machine")
    source = str(ref)
    if isinstance(found, Machine):
        if logic_ref is not None or version is not None:
            raise _Problem(
                f"{ref!r} is already a compiled Machine; LOGIC and VERSION apply to configs",
                "point CONFIG at the config dict or JSON file instead",
            )
        return found, source
    if not isinstance(found, Mapping):
        raise _Problem(
            f"{ref!r} is a {type(found).__name__}, not a Machine, a config dict or a factory",
            "point at create_machine(...)'s result or at the config",
        )
    logic = None
    if logic_ref is not None:
        logic = _resolve(logic_ref, "logic")
        if not isinstance(logic, MachineLogic):
            raise _Problem(
                f"LOGIC {logic_ref!r} is a {type(logic).__name__}, not a MachineLogic",
                "point at MachineLogic(actions=..., guards=...) or a factory returning one",
            )
    if version is not None and not isinstance(version, str):
        raise _Problem(f"VERSION must be a string, got {version!r}")
    try:
        return create_machine(found, logic=logic, version=version), source
    except XsmError as exc:
        raise _Problem(exc.message, exc.hint) from exc


class Registry:
    """Registered machines by name (read-only mapping-like).

    ``machines["order"]`` raises ``UnknownMachineError`` for a name that is
    not configured and ``ImproperlyConfigured`` for one that failed to load.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._entries: dict[str, MachineEntry] | None = None
        self._problems: list[LoadProblem] = []

    def load(self) -> list[LoadProblem]:
        """Compile every configured machine (once); returns the problems."""
        with self._lock:
            if self._entries is not None:
                return list(self._problems)
            entries: dict[str, MachineEntry] = {}
            problems: list[LoadProblem] = []
            by_id: dict[str, MachineEntry] = {}
            for name, spec in conf.get_settings().machines.items():
                source = str(spec.get("CONFIG", "")) if isinstance(spec, Mapping) else str(spec)
                if not isinstance(name, str) or not _NAME.match(name):
                    problems.append(
                        LoadProblem(
                            str(name),
                            source,
                            "machine names are 1-64 of A-Z a-z 0-9 _ . -",
                        )
                    )
                    continue
                try:
                    machine, source = _compile(spec)
                except _Problem as exc:
                    problems.append(LoadProblem(name, source, exc.message, exc.hint))
                    continue
                twin = by_id.get(machine.id)
                if twin is not None and twin.machine is not machine:
                    problems.append(
                        LoadProblem(
                            name,
                            source,
                            f"machine id {machine.id!r} is already used by {twin.name!r}",
                            "stored records name their machine by id; give each chart its own 'id'",
                        )
                    )
                    continue
                entries[name] = MachineEntry(name, machine, source)
                by_id.setdefault(machine.id, entries[name])
            self._entries = entries
            self._problems = problems
            return list(problems)

    @property
    def problems(self) -> list[LoadProblem]:
        self.load()
        return list(self._problems)

    def _all(self) -> dict[str, MachineEntry]:
        entries = self._entries
        if entries is None:
            self.load()
            entries = self._entries
        assert entries is not None
        return entries

    def __getitem__(self, name: str) -> MachineEntry:
        entries = self._all()
        found = entries.get(name)
        if found is not None:
            return found
        for problem in self._problems:
            if problem.name == name:
                raise ImproperlyConfigured(str(problem))
        raise UnknownMachineError(name, known=tuple(entries))

    def get(self, name: str, default: MachineEntry | None = None) -> MachineEntry | None:
        return self._all().get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def names(self) -> list[str]:
        """Registered names, in settings order."""
        return list(self._all())

    def values(self) -> list[MachineEntry]:
        return list(self._all().values())

    def items(self) -> list[tuple[str, MachineEntry]]:
        return list(self._all().items())

    def by_machine_id(self) -> dict[str, Machine]:
        """Machine id -> machine (what ``DueTimerScanner`` needs: stored
        records name their machine by id)."""
        return {e.machine.id: e.machine for e in self._all().values()}

    def name_for_machine_id(self, machine_id: str) -> str | None:
        for entry in self._all().values():
            if entry.machine.id == machine_id:
                return entry.name
        return None

    def reset(self) -> None:
        """Forget the compiled machines (reloaded on next use)."""
        with self._lock:
            self._entries = None
            self._problems = []


#: The process-wide registry.
machines = Registry()
conf.on_reset(machines.reset)
