"""The machines named in ``XSM['MACHINES']``, each with an ORM-style manager.

::

    from django_xsm.registry import machines

    machines["order"].machine               # the compiled Machine
    machines["order"].objects.get("order:42")   # see django_xsm.managers
    machines.names(), machines.by_machine_id()

``XSM['MACHINES']``: docs/settings.md (Machines); its ``PERMISSIONS`` are
applied by ``django_xsm.fields.events.may_send``, the one rule every caller
uses. Machines compile once, in ``AppConfig.ready`` (again only when the
settings change); one that fails to load does not stop start-up: it is
reported as ``xsm.E007`` and raised as ``ImproperlyConfigured`` when used.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, overload

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_xsm import conf
from django_xsm.brief import brief, brief_error
from django_xsm.engine import Machine, MachineLogic, create_machine
from django_xsm.exceptions import UnknownMachineError, XsmError
from django_xsm.persistence import Plugin

from .managers import InstanceDoesNotExist, InstanceManager, InstanceView

__all__ = [
    "VIEW",
    "InstanceDoesNotExist",
    "InstanceManager",
    "InstanceView",
    "LoadProblem",
    "MachineEntry",
    "PermissionCheck",
    "PermissionRule",
    "Registry",
    "machines",
]

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_SPEC_KEYS = ("CONFIG", "LOGIC", "VERSION", "PERMISSIONS")

#: An object-level permission check: ``fn(user, target, event_type) -> bool``
#: (target: the model row for a StatechartField, else the instance key;
#: event_type None: following the instance, the rules under :data:`VIEW`).
PermissionCheck: TypeAlias = Callable[[Any, Any, str | None], bool]
#: One rule of ``PERMISSIONS``: a Django permission or a check.
PermissionRule: TypeAlias = str | PermissionCheck
#: The ``PERMISSIONS`` key of the rules for following an instance (in the
#: reserved ``xsm`` namespace, so no event of a chart can be called so).
VIEW = "xsm.view"


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


class MachineEntry:
    """One registered machine: ``name``, the compiled ``machine``, where it
    came from (``source``), its manager ``objects`` and the ``writers`` of
    the model rows its keys name (handed to every block its manager opens
    without a row's own writer)."""

    DoesNotExist = InstanceDoesNotExist

    def __init__(
        self,
        name: str,
        machine: Machine,
        source: str,
        permissions: Mapping[str, tuple[PermissionRule, ...]] | None = None,
        writers: list[Plugin] | None = None,
    ) -> None:
        self.name = name
        self._writers = writers if writers is not None else []
        self.machine = machine
        self.source = source
        #: event type (or :data:`VIEW`) -> the rules that must all grant it:
        #: Django permissions ("app_label.codename") and checks
        self.permissions: dict[str, tuple[PermissionRule, ...]] = dict(permissions or {})
        self.objects = InstanceManager(self)

    @property
    def writers(self) -> tuple[Plugin, ...]:
        """The model projection writers of this machine (see
        :meth:`Registry.add_writer`)."""
        return tuple(self._writers)

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
            f"cannot import {what} {path!r}: {brief_error(exc)}",
            "give a dotted path 'package.module.attribute' to an importable object",
        ) from exc
    except Exception as exc:  # the module itself is broken: start-up goes on
        raise _Problem(
            f"importing {what} {path!r} raised {brief_error(exc)}",
            f'fix the module; `python -c "import {path.rpartition(".")[0] or path}"` '
            "shows the traceback",
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
        raise _Problem(f"expected a dotted path or a .json path, got {brief(ref)}")
    found = _read_json(ref) if ref.endswith(".json") else _import(ref, what)
    if not isinstance(found, Machine | Mapping | MachineLogic) and callable(found):
        try:
            found = found()
        except XsmError as exc:
            raise _Problem(exc.message, exc.hint) from exc
        except Exception as exc:
            raise _Problem(f"calling the {what} factory {ref!r} raised {brief_error(exc)}") from exc
    return found


_RULE_HINT = (
    "give 'app_label.codename', a callable fn(user, target, event_type) -> bool, the dotted "
    "path of one ('orders.perms.owns_order'), or a list of these"
)


def _rule(event: str, rule: Any) -> PermissionRule:
    """One rule of ``PERMISSIONS[event]``: a permission string as it is, a
    dotted path imported (it must name a callable)."""
    where = f"PERMISSIONS[{event!r}]"
    if callable(rule):
        return rule  # type: ignore[no-any-return]
    if not isinstance(rule, str) or not rule or rule != rule.strip() or "." not in rule:
        raise _Problem(f"{where} must be a permission or a check, got {brief(rule)}", _RULE_HINT)
    if rule.count(".") == 1:
        return rule  # "app_label.codename"
    found = _import(rule, f"the {where} check")
    if not callable(found):
        raise _Problem(
            f"{where}: {rule!r} is a {type(found).__name__}, not a callable",
            "point at a function fn(user, target, event_type) -> bool",
        )
    return found  # type: ignore[no-any-return]


def _permissions(spec: Any, machine: Machine) -> dict[str, tuple[PermissionRule, ...]]:
    """The ``PERMISSIONS`` of a dict spec, checked against the machine; each
    event's rules as a tuple, dotted paths imported."""
    found = spec.get("PERMISSIONS", {}) if isinstance(spec, Mapping) else {}
    if not isinstance(found, Mapping):
        raise _Problem("PERMISSIONS must be a dict", "e.g. {'REFUND': 'orders.refund_order'}")
    rules: dict[str, tuple[PermissionRule, ...]] = {}
    for event, given in found.items():
        if event != VIEW and event not in machine.events:
            raise _Problem(
                f"PERMISSIONS names event {event!r}, which the machine does not have",
                f"the machine's events: {', '.join(sorted(machine.events)) or 'none'} "
                f"(and {VIEW!r}: following an instance)",
            )
        listed = list(given) if isinstance(given, list | tuple) else [given]
        if not listed:
            raise _Problem(f"PERMISSIONS[{event!r}] is an empty list", _RULE_HINT)
        rules[event] = tuple(_rule(event, rule) for rule in listed)
    return rules


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
        raise _Problem(f"VERSION must be a string, got {brief(version)}")
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
        self._names: dict[str, str] = {}
        self._problems: list[LoadProblem] = []
        #: machine name -> projection writers (kept across reloads: they
        #: come from model fields, defined once per process)
        self._writers: dict[str, list[Plugin]] = {}

    def add_writer(self, name: str, writer: Plugin) -> None:
        """Hand ``writer`` (a block plugin that writes the model rows the
        keys of machine ``name`` name) to every block of that machine that
        commits without a row's own writer: its manager's blocks and the
        timer scanner's. Model fields call it as their model is defined."""
        with self._lock:
            self._writers.setdefault(name, []).append(writer)

    def writers(self) -> tuple[Plugin, ...]:
        """Every machine's projection writers (each leaves other machines'
        blocks alone): what the timer scanner adds to its plugins."""
        with self._lock:
            return tuple(w for found in self._writers.values() for w in found)

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
                try:
                    if not isinstance(name, str) or not _NAME.match(name):
                        raise _Problem("machine names are 1-64 of A-Z a-z 0-9 _ . -")
                    machine, source = _compile(spec)
                    permissions = _permissions(spec, machine)
                    twin = by_id.get(machine.id)
                    if twin is not None and twin.machine is not machine:
                        raise _Problem(
                            f"machine id {machine.id!r} is already used by {twin.name!r}",
                            "stored records name their machine by id; give each chart its own 'id'",
                        )
                except _Problem as exc:
                    problems.append(LoadProblem(str(name), source, exc.message, exc.hint))
                    continue
                writers = self._writers.setdefault(name, [])
                entries[name] = MachineEntry(name, machine, source, permissions, writers)
                by_id.setdefault(machine.id, entries[name])
            self._entries = entries
            self._names = {machine_id: entry.name for machine_id, entry in by_id.items()}
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

    @overload
    def name_for_machine_id(self, machine_id: str) -> str | None: ...

    @overload
    def name_for_machine_id(self, machine_id: str, default: str) -> str: ...

    def name_for_machine_id(self, machine_id: str, default: str | None = None) -> str | None:
        """The registered name of the machine whose id stored records carry
        (the first name registered for it), else ``default``."""
        self._all()
        return self._names.get(machine_id, default)

    def reset(self) -> None:
        """Forget the compiled machines (reloaded on next use)."""
        with self._lock:
            self._entries = None
            self._names = {}
            self._problems = []


#: The process-wide registry (handed to the backend by ``XsmConfig.ready()``).
machines = Registry()
conf.on_reset(machines.reset)
