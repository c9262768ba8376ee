"""``create_machine``, :class:`MachineLogic` and the compiled :class:`Machine`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django_xsm.exceptions import InvalidConfigError

from .chart.build import compile_chart
from .chart.config import parse_config
from .chart.model import StateNode, Transition
from .chart.problems import suggest
from .events import INIT_EVENT_TYPE, Event, to_event
from .instance import ACTIVE, Instance
from .run.configuration import ConfigurationCache, build_match_index
from .run.context import copy_context
from .run.results import ActionCall, TransitionResult
from .run.snapshot import load_state, snapshot_of, structure_hash
from .run.steps import MicroPlan, compute_plan, macrostep

__all__ = ["Machine", "MachineLogic", "create_machine"]


class MachineLogic:
    """The functions a chart refers to by name.

    ``actions[name](instance, context, event, action)``; ``guards[name](context,
    event)`` or ``(context, event, params)`` when the function takes a third
    positional parameter; ``delays[name]``: milliseconds, or
    ``fn(context, event) -> ms``.
    """

    __slots__ = ("actions", "delays", "guards")

    def __init__(
        self,
        actions: Mapping[str, Callable[..., Any]] | None = None,
        guards: Mapping[str, Callable[..., Any]] | None = None,
        delays: Mapping[str, int | float | Callable[..., Any]] | None = None,
    ) -> None:
        self.actions: dict[str, Callable[..., Any]] = _functions("actions", actions)
        self.guards: dict[str, Callable[..., Any]] = _functions("guards", guards)
        self.delays: dict[str, Any] = {}
        for name, value in (delays or {}).items():
            ok = callable(value) or (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and 0 <= value < float("inf")
            )
            if not isinstance(name, str) or not ok:
                raise InvalidConfigError(
                    f"Delay {name!r} must be milliseconds >= 0 or a function",
                    path=f"logic.delays.{name}",
                    hint="e.g. delays={'TIMEOUT': 5000}",
                )
            self.delays[name] = value

    def __repr__(self) -> str:
        return (
            f"MachineLogic(actions={sorted(self.actions)}, "
            f"guards={sorted(self.guards)}, delays={sorted(self.delays)})"
        )


def _functions(
    kind: str, given: Mapping[str, Callable[..., Any]] | None
) -> dict[str, Callable[..., Any]]:
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise InvalidConfigError(
            f"MachineLogic({kind}=...) must be a dict of name -> function",
            path=f"logic.{kind}",
        )
    out = {}
    for name, fn in given.items():
        if not isinstance(name, str) or not callable(fn):
            raise InvalidConfigError(
                f"{kind[:-1].capitalize()} {name!r} must be a callable with a string name",
                path=f"logic.{kind}.{name}",
                hint=f"e.g. {kind}={{'{name}': my_function}}",
            )
        out[name] = fn
    return out


def create_machine(
    config: Mapping[str, Any],
    *,
    logic: MachineLogic | None = None,
    version: str | None = None,
    migrations: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
    max_microsteps: int = 1000,
) -> Machine:
    """Validate and compile ``config`` once. ``version``: this argument, else
    ``config["version"]``, else ``""``. ``migrations[old_version](snapshot) ->
    snapshot`` upgrades snapshots of older versions on restore."""
    if logic is None:
        logic = MachineLogic()
    elif not isinstance(logic, MachineLogic):
        raise InvalidConfigError(
            "logic must be a MachineLogic",
            path="logic",
            hint="MachineLogic(actions=..., guards=...)",
        )
    if version is not None and not isinstance(version, str):
        raise InvalidConfigError(
            f"version must be a string, got {type(version).__name__}",
            path="version",
            hint=f"version={str(version)!r}",
        )
    if (
        isinstance(max_microsteps, bool)
        or not isinstance(max_microsteps, int)
        or max_microsteps < 1
    ):
        raise InvalidConfigError("max_microsteps must be an int >= 1", path="max_microsteps")
    found = migrations or {}
    if not isinstance(found, Mapping) or not all(
        isinstance(k, str) and callable(v) for k, v in found.items()
    ):
        raise InvalidConfigError(
            "migrations must be a dict of old version (str) -> function",
            path="migrations",
        )
    parsed = parse_config(config)
    chart = compile_chart(
        parsed.root, actions=logic.actions, guards=logic.guards, delays=logic.delays
    )
    machine = Machine.__new__(Machine)
    final_version = parsed.version if version is None else version
    frozen = parsed.frozen
    if version is not None:
        from types import MappingProxyType

        frozen = MappingProxyType({**frozen, "version": version})
    values = {
        "id": parsed.machine_id,
        "version": final_version,
        "config": frozen,
        "root": chart.root,
        "nodes": chart.nodes,
        "_by_id": chart.by_id,
        "logic": logic,
        "migrations": dict(found),
        "max_microsteps": max_microsteps,
        "configurations": ConfigurationCache(chart.nodes),
        "_match_index": build_match_index(chart.root, chart.nodes),
        "_context": parsed.context,
        "_initial": None,
        "_hash": None,
        "events": tuple(
            dict.fromkeys(t.event for n in chart.nodes for t in n.transitions if t.event)
        ),
    }
    for name, value in values.items():
        object.__setattr__(machine, name, value)
    return machine


class Machine:
    """A compiled chart (immutable). Build with :func:`create_machine`."""

    __slots__ = (
        "_by_id",
        "_context",
        "_hash",
        "_initial",
        "_match_index",
        "config",
        "configurations",
        "events",
        "id",
        "logic",
        "max_microsteps",
        "migrations",
        "nodes",
        "root",
        "version",
    )

    id: str
    version: str
    config: Mapping[str, Any]
    root: StateNode
    nodes: tuple[StateNode, ...]
    events: tuple[str, ...]
    logic: MachineLogic
    migrations: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]
    max_microsteps: int
    configurations: ConfigurationCache
    _by_id: dict[str, StateNode]
    _match_index: dict[str, StateNode]
    _context: dict[str, Any]
    _initial: MicroPlan | None
    _hash: str | None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Machine objects are immutable")

    @property
    def structure_hash(self) -> str:
        """Stable hex digest of the chart's structure (see ``structure_hash``)."""
        found = self._hash
        if found is None:
            found = structure_hash(self)
            object.__setattr__(self, "_hash", found)
        return found

    def get_state(self, state_id: str) -> StateNode:
        """A state by full id (``"order.cart"``), ``#id`` or path (``"cart"``)."""
        node = self._by_id.get(state_id) or self._match_index.get(state_id)
        if node is None:
            raise KeyError(
                f"Unknown state {state_id!r} in machine {self.id!r}"
                + (f"; {suggest(state_id, self._by_id)}" if suggest(state_id, self._by_id) else "")
            )
        return node

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every transition of the chart, states in document order."""
        return tuple(t for n in self.nodes for t in n.transitions)

    # -- instances ---------------------------------------------------------

    def _instance(self, ctx: dict[str, Any], clock: Callable[[], int] | None, now: int) -> Instance:
        inst = Instance.__new__(Instance)
        for name, value in (
            ("_m", self),
            ("_ctx", ctx),
            ("_clock", clock),
            ("_now", now),
            ("_step_now", None),
            ("_hist", {}),
            ("_deadlines", ()),
            ("_seq", 0),
            ("_status", ACTIVE),
            ("_collect", None),
            ("_cfg", self.configurations.get(0)),
            ("_busy", False),
        ):
            object.__setattr__(inst, name, value)
        return inst

    def _initial_plan(self) -> MicroPlan:
        plan = self._initial
        if plan is None:
            plan = compute_plan(self, None, [], {})
            object.__setattr__(self, "_initial", plan)
        return plan

    def _start(self, inst: Instance) -> list[Transition]:
        object.__setattr__(inst, "_busy", True)
        try:
            return macrostep(inst, Event(INIT_EVENT_TYPE, {}), self._initial_plan())
        finally:
            object.__setattr__(inst, "_busy", False)

    def start(
        self,
        context: dict[str, Any] | None = None,
        *,
        clock: Callable[[], int] | None = None,
    ) -> Instance:
        """A new instance: context (deep-copied; default the config's), entry
        actions of the initial states run, then the initial macrostep.
        ``clock()`` returns wall time in int ms and is read only to arm
        ``after`` deadlines; without it ``now`` is the time of the last step
        (0 for a new instance)."""
        ctx = copy_context(self._context if context is None else context)
        inst = self._instance(ctx, clock, 0)
        self._start(inst)
        return inst

    def restore(
        self, snapshot: Mapping[str, Any], *, clock: Callable[[], int] | None = None
    ) -> Instance:
        """Inverse of ``Instance.snapshot()``: runs no actions, keeps
        deadlines verbatim. Migrates older versions; raises
        ``SnapshotCorruptError`` / ``MigrationError``."""
        return self._restore(snapshot, clock, 0)[0]

    def _restore(
        self, snapshot: object, clock: Callable[[], int] | None, now: int
    ) -> tuple[Instance, bool]:
        state = load_state(self, snapshot)
        inst = self._instance(state.context, clock, now)
        for name, value in (
            ("_cfg", self.configurations.get(state.mask)),
            ("_hist", state.history),
            ("_deadlines", state.deadlines),
            ("_seq", state.seq),
            ("_status", state.status),
        ):
            object.__setattr__(inst, name, value)
        return inst, state.migrated

    # -- pure API ------------------------------------------------------------

    def initial_snapshot(
        self, context: dict[str, Any] | None = None, *, now: int
    ) -> TransitionResult:
        """Pure start: the initial snapshot and the entry actions to run."""
        _check_now(now)
        ctx = copy_context(self._context if context is None else context)
        inst = self._instance(ctx, None, now)
        collected: list[ActionCall] = []
        object.__setattr__(inst, "_collect", collected)
        taken = self._start(inst)
        return TransitionResult(snapshot_of(inst), tuple(collected), True, True, tuple(taken))

    def transition(
        self, snapshot: Mapping[str, Any], event: object, *, now: int
    ) -> TransitionResult:
        """Pure step: the next snapshot and the actions to run; executes
        nothing and never mutates ``snapshot``. Guards see the input
        snapshot's context (actions do not run, so their context changes are
        not visible to later guards of the same macrostep)."""
        _check_now(now)
        ev = to_event(event)
        inst, migrated = self._restore(snapshot, None, now)
        collected: list[ActionCall] = []
        object.__setattr__(inst, "_collect", collected)
        receipt = inst.send(ev)
        return TransitionResult(
            snapshot_of(inst),
            tuple(collected),
            receipt.accepted,
            receipt.changed or migrated,
            receipt.transitions,
        )

    def __repr__(self) -> str:
        return f"<Machine {self.id!r} version={self.version!r} states={len(self.nodes)}>"


def _check_now(now: object) -> None:
    if isinstance(now, bool) or not isinstance(now, int):
        raise InvalidConfigError(
            f"now must be int milliseconds since the epoch, got {now!r:.40}",
            path="now",
            hint="now=int(time.time() * 1000)",
        )
