"""The public faces: ``create_machine``, the compiled :class:`Machine` and
its running :class:`Instance`.

``create_machine`` parses and compiles the chart (:mod:`.chart`); a
machine starts, restores and steps instances whose work is done by
:mod:`.run`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import (
    ArgumentTypeError,
    InvalidConfigError,
    ReservedEventError,
    UnknownEventError,
)

from .chart.build import compile_chart
from .chart.compiled import Chart
from .chart.config import parse_config
from .chart.logic import MachineLogic
from .chart.model import StateNode, Transition
from .events import reserved_namespace, to_event
from .run.context import copy_context
from .run.deadlines import Deadline
from .run.microstep import MicroPlan, compute_plan
from .run.program import Migrations, Program
from .run.results import ActionCall, TransitionResult
from .run.runner import Runner
from .run.snapshot import dump_snapshot, load_snapshot
from .run.state import RunState

__all__ = ["Instance", "Machine", "create_machine"]


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
            hint="pass the version as a string",
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
    frozen = parsed.frozen
    if version is not None:
        from types import MappingProxyType

        frozen = MappingProxyType({**frozen, "version": version})
    return Machine(
        compile_chart(parsed.root, logic),
        version=parsed.version if version is None else version,
        config=frozen,
        context=parsed.context,
        logic=logic,
        migrations=dict(found),
        max_microsteps=max_microsteps,
    )


class Machine(Program):
    """A compiled chart bound to its logic, version and migrations
    (immutable). Build with :func:`create_machine`."""

    __slots__ = (
        "_context",
        "_initial",
        "config",
        "event_types",
        "events",
        "id",
        "logic",
        "nodes",
        "root",
    )

    id: str
    config: Mapping[str, Any]
    root: StateNode
    nodes: tuple[StateNode, ...]
    #: every event descriptor of the chart's transitions (wildcards and
    #: reserved ones included), first occurrence first
    events: tuple[str, ...]
    #: the types a caller may send by name: the exact descriptors outside
    #: the reserved namespaces (what admin buttons and events() list from)
    event_types: tuple[str, ...]
    logic: MachineLogic
    _context: dict[str, Any]
    _initial: MicroPlan | None

    def __init__(
        self,
        chart: Chart,
        *,
        version: str,
        config: Mapping[str, Any],
        context: dict[str, Any],
        logic: MachineLogic,
        migrations: Migrations,
        max_microsteps: int,
    ) -> None:
        super().__init__(
            chart, version=version, migrations=migrations, max_microsteps=max_microsteps
        )
        self._init_fields(
            id=chart.id,
            root=chart.root,
            nodes=chart.nodes,
            events=chart.events,
            event_types=chart.event_types,
            config=config,
            logic=logic,
            _context=context,
            _initial=None,
        )

    @property
    def structure_hash(self) -> str:
        """Stable hex digest of the chart's structure (see
        :func:`~.chart.compiled.structure_hash`)."""
        return self.chart.structure_hash

    def get_state(self, state_id: str) -> StateNode:
        """A state by full id (``"order.cart"``), ``#id`` or path (``"cart"``)."""
        return self.chart.get_state(state_id)

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every transition of the chart, states in document order."""
        return self.chart.transitions

    def knows(self, event_type: str) -> bool:
        """Can some state of the chart ever take ``event_type`` (an exact
        descriptor or a matching wildcard anywhere)? Reads the chart only."""
        return self.chart.knows(event_type)

    def check_sendable(self, event: object) -> None:
        """Refuse what no caller outside django-xsm may send to this machine
        (``event``: a type or anything ``send()`` accepts): ``ReservedEventError``
        for ``xstate.*`` / ``xsm.*``, ``UnknownEventError`` for a type no state
        can ever take. Every django-xsm API that persists runs it before any
        I/O; ``Instance.send()`` does not (docs/engine.md, "Unknown and
        reserved event types")."""
        event_type = event if type(event) is str else to_event(event).type
        namespace = reserved_namespace(event_type)
        if namespace:
            raise ReservedEventError(event_type, namespace=namespace)
        chart = self.chart
        if not chart.knows(event_type):
            raise UnknownEventError(
                event_type, machine=self.id, suggestions=chart.close_event_types(event_type)
            )

    # -- instances ---------------------------------------------------------

    def _initial_plan(self) -> MicroPlan:
        plan = self._initial
        if plan is None:
            plan = compute_plan(self, None, [], {})
            self._init_fields(_initial=plan)
        return plan

    def _fresh(self, context: dict[str, Any] | None, now: int) -> RunState:
        ctx = copy_context(self._context if context is None else context)
        return RunState(self.configurations.get(0), ctx, now=now)

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
        inst = Instance(self, self._fresh(context, 0), clock=clock)
        inst._enter(self._initial_plan())
        return inst

    def restore(
        self, snapshot: Mapping[str, Any], *, clock: Callable[[], int] | None = None
    ) -> Instance:
        """Inverse of ``Instance.snapshot()``: runs no actions, keeps
        deadlines verbatim. Migrates older versions; raises
        ``SnapshotCorruptError`` / ``MigrationError``."""
        state, _ = load_snapshot(self, snapshot, now=0)
        return Instance(self, state, clock=clock)

    # -- pure API ------------------------------------------------------------

    def initial_snapshot(
        self, context: dict[str, Any] | None = None, *, now: int
    ) -> TransitionResult:
        """Pure start: the initial snapshot and the entry actions to run."""
        _check_now(now)
        collected: list[ActionCall] = []
        inst = Instance(self, self._fresh(context, now), collect=collected)
        taken = inst._enter(self._initial_plan())
        return TransitionResult(
            inst.snapshot(), tuple(collected), True, True, tuple(taken), inst.last_emitted
        )

    def transition(
        self, snapshot: Mapping[str, Any], event: object, *, now: int
    ) -> TransitionResult:
        """Pure step: the next snapshot and the actions to run; executes
        nothing and never mutates ``snapshot``. Guards see the input
        snapshot's context (actions do not run, so their context changes are
        not visible to later guards of the same macrostep)."""
        _check_now(now)
        ev = to_event(event)
        state, migrated = load_snapshot(self, snapshot, now=now)
        collected: list[ActionCall] = []
        inst = Instance(self, state, collect=collected)
        receipt = inst.send(ev)
        return TransitionResult(
            inst.snapshot(),
            tuple(collected),
            receipt.accepted,
            receipt.changed or migrated,
            receipt.transitions,
            receipt.emitted,
        )

    def __repr__(self) -> str:
        return f"<Machine {self.id!r} version={self.version!r} states={len(self.nodes)}>"


def _check_now(now: object) -> None:
    if isinstance(now, bool) or not isinstance(now, int):
        raise InvalidConfigError(
            f"now must be int milliseconds since the epoch, got {brief(now)}",
            path="now",
            hint="now=int(time.time() * 1000)",
        )


class Instance(Runner):
    """A live machine instance. Create with ``machine.start()`` or
    ``machine.restore(snapshot)``; see the module docs of
    :mod:`django_xsm.engine` for the semantics."""

    __slots__ = ()

    _program: Machine  # an instance is built by its machine only

    @property
    def machine(self) -> Machine:
        return self._program

    @property
    def value(self) -> Any:
        """The XState state value (a fresh copy)."""
        return self._state.cfg.value()

    @property
    def state_ids(self) -> tuple[str, ...]:
        """Full ids of every active state, root first, document order."""
        return self._state.cfg.state_ids

    @property
    def context(self) -> dict[str, Any]:
        """The live context dict (actions mutate it)."""
        return self._state.context

    @property
    def status(self) -> str:
        """``"active"`` or ``"done"`` (a root final state was reached)."""
        return self._state.status

    @property
    def deadlines(self) -> tuple[Deadline, ...]:
        return self._state.deadlines

    @property
    def history(self) -> dict[str, tuple[str, ...]]:
        """Recorded history per history state id (state ids)."""
        return {h: tuple(n.id for n in nodes) for h, nodes in self._state.history.items()}

    def matches(self, state_id: str) -> bool:
        """Is this state active? Accepts ``"paid"``, ``"order.paid"``,
        nested ``"a.b"`` relative to the root, full ids and ``"#id"``;
        unknown names are simply not active; a ``state_id`` that is not a
        str is an :class:`~django_xsm.exceptions.ArgumentTypeError`."""
        if not isinstance(state_id, str):
            raise ArgumentTypeError("state_id", state_id, expected="a str such as 'paid'")
        node = self._program.chart.match_index.get(state_id)
        return node is not None and bool(self._state.cfg.mask & node.bit)

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready dict (see :mod:`.run.snapshot`); shares nothing mutable."""
        return dump_snapshot(self._program, self._state)

    def __repr__(self) -> str:
        return f"<Instance {self._program.id!r} value={self.value!r} status={self.status!r}>"
