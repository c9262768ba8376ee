"""Running microstep plans to completion (docs/engine.md, "Semantics"):
:class:`Stepper`. Actions run for real or, for the pure
``Machine.transition()``, are collected as :class:`ActionCall` objects.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.actions import BUILTIN_ACTIONS
from django_xsm.engine.chart.logic import MAX_DELAY_MS
from django_xsm.engine.chart.model import Action, Guard, StateNode, Transition
from django_xsm.engine.events import AFTER_PREFIX, Event, to_event
from django_xsm.exceptions import InvalidConfigError, MicrostepLimitError

from . import observe
from .context import MappingView, ReadOnlyError, copy_data
from .deadlines import delay_ms
from .microstep import OP_ARM, OP_BUILTIN, OP_CALL, MicroPlan, compute_plan
from .program import Program
from .results import ActionCall
from .selection import select_eventless, select_transitions
from .state import ACTIVE, RunState

__all__ = ["UNCHANGED", "Marker", "Stepper"]

_PLAN_LIMIT = 256  # cached plans per configuration


class Marker:
    """A named sentinel."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNCHANGED: Any = Marker("UNCHANGED")  # no context copy taken: nothing to compare


class _Effects:
    """What the built-in actions of one macrostep do (:class:`Effects` of
    :mod:`django_xsm.engine.actions`): raised events join its queue, emitted
    ones (copied) the step's list."""

    __slots__ = ("emitted", "queue")

    def __init__(self, emitted: list[dict[str, Any]]) -> None:
        self.queue: deque[Event] = deque()
        self.emitted = emitted

    def raise_event(self, event: Event) -> None:
        self.queue.append(event)

    def emit_event(self, event: dict[str, Any]) -> None:
        self.emitted.append(copy_data(event))


class Stepper:
    """Executes plans of one :class:`Program` against one :class:`RunState`.

    ``clock()`` (int ms) is read at most once per step, and only when a
    deadline is armed; ``collect`` is the list the pure API gathers action
    calls in (``None``: actions run).
    """

    __slots__ = (
        "_busy",
        "_clock",
        "_collect",
        "_emitted",
        "_program",
        "_state",
        "_step_now",
    )

    def __init__(
        self,
        program: Program,
        state: RunState,
        *,
        clock: Callable[[], int] | None = None,
        collect: list[ActionCall] | None = None,
    ) -> None:
        self._program = program
        self._state = state
        self._clock = clock
        self._collect = collect
        self._step_now: int | None = None
        self._busy = False  # inside a step: a send() from an action is refused
        # events emitted by the step running now (or the last one): they go
        # on its receipt; nothing here delivers them
        self._emitted: list[dict[str, Any]] = []

    def emit(self, event: object) -> None:
        """Hand ``event`` (a dict with a ``type``, or a type) to the outbox, from an
        action: it is returned on this send's receipt (``receipt.emitted``)
        and, inside ``persisted()``, written to the outbox by the commit
        that records this step, never delivered by the engine itself. A
        send that fails emits nothing."""
        if not self._busy:
            raise InvalidConfigError(
                "emit() was called outside a send",
                path="emit",
                hint="call instance.emit({...}) from an action, or use an "
                "{'type': 'xstate.emit', 'event': {...}} action in the chart",
            )
        ev = to_event(event)  # the one normaliser: a type, a dict or an Event
        self._emitted.append({"type": ev.type, **copy_data(dict(ev.data))})

    @property
    def last_emitted(self) -> tuple[dict[str, Any], ...]:
        """What the last start or send emitted (``receipt.emitted`` of a
        send; for ``machine.start()``, what the initial entry actions did)."""
        return tuple(self._emitted)

    # -- the hooks of a microstep --------------------------------------------

    def _call(self, action: Action, event: Event) -> None:
        collect = self._collect
        if collect is None:
            action.fn(self, self._state.context, event, action)  # type: ignore[misc]
        else:
            collect.append(ActionCall(action.type, action.params, event))

    def _checker(self, event: Event) -> Callable[[Guard], bool]:
        """Guards of one event see read-only views of the context and the
        payload (a refused event must change nothing)."""
        ctx = MappingView(self._state.context)
        seen = Event(event.type, MappingView(event.data))  # type: ignore[arg-type]

        def check(guard: Guard) -> bool:
            try:
                if guard.wants_params:
                    return bool(guard.fn(ctx, seen, guard.params))
                return bool(guard.fn(ctx, seen))
            except ReadOnlyError:
                raise ReadOnlyError(
                    f"Guard {brief(guard.type)} at {guard.path} tried to change the context "
                    "or the event: guards are read-only (change the context in an action)"
                ) from None

        return check

    def _time(self) -> int:
        """``now`` for this step: the clock is read at most once per send."""
        now = self._step_now
        if now is None:
            state = self._state
            if self._clock is not None:
                raw = self._clock()
                if (
                    isinstance(raw, bool)
                    or not isinstance(raw, int | float)
                    or not -MAX_DELAY_MS < raw < MAX_DELAY_MS  # also NaN and inf
                ):
                    raise InvalidConfigError(
                        f"The clock returned {brief(raw)}, not int milliseconds since the epoch",
                        path="clock",
                        hint="clock=lambda: int(time.time() * 1000)",
                    )
                state.set_time(int(raw))
            now = self._step_now = state.now
        return now

    def _arm(self, node: StateNode, event: Event) -> None:
        now = self._time()
        ctx = self._state.context
        timings = []
        for delay, event_type, amount in node.delays:
            ms = amount if type(amount) is int else delay_ms(delay, amount, ctx, event)
            timings.append((ms, event_type, delay))
        self._state.arm(node.id, now, timings)

    def _context_marker(self, plan: MicroPlan) -> Any:
        """A copy of the context when ``plan`` keeps the configuration and
        the history and runs actions (only they can change the context)."""
        if (
            self._collect is None
            and plan.has_calls
            and plan.new_cfg.mask == self._state.cfg.mask
            and not plan.history_updates
        ):
            return copy_data(self._state.context)
        return UNCHANGED

    def _context_changed(self, marker: Any) -> bool:
        return marker is not UNCHANGED and marker != self._state.context

    # -- plans -----------------------------------------------------------------

    def _plan_for(self, transitions: list[Transition]) -> MicroPlan:
        state = self._state
        cfg = state.cfg
        key = tuple(transitions)
        plan: MicroPlan | None = cfg.plans.get(key)
        if plan is None:
            plan = compute_plan(self._program, cfg, transitions, state.history)
            if not plan.uses_history and len(cfg.plans) < _PLAN_LIMIT:
                cfg.plans[key] = plan
        return plan

    def _run_plan(self, plan: MicroPlan, event: Event, effects: _Effects) -> None:
        state = self._state
        if plan.history_updates:
            state.record_history(plan.history_updates)
        if plan.cancel:
            state.cancel_deadlines(plan.cancel)
        for kind, item in plan.ops:
            if kind == OP_CALL:
                self._call(item, event)
            elif kind == OP_BUILTIN:
                BUILTIN_ACTIONS[item.type].execute(item, effects)
            elif kind == OP_ARM:
                self._arm(item, event)
            else:
                effects.queue.append(Event(item))
        state.move_to(plan.new_cfg)
        if plan.done:
            state.finish()
        observer = observe.current
        if observer is not None:  # chart coverage (django_xsm.testing)
            observer(self._program, plan.transitions, plan.entered)

    def _macrostep(self, event: Event, first: MicroPlan | None) -> list[Transition]:
        """Run ``first`` and then everything it triggers; returns the
        transitions taken, in order. ``first=None``: the event enabled no
        transition, but eventless ones are still selected (XState's
        ``macrostep`` does so for every event)."""
        state = self._state
        root = self._program.chart.root
        limit = self._program.max_microsteps
        effects = _Effects(self._emitted)
        queue = effects.queue
        taken: list[Transition] = []
        steps = 0
        if first is not None:
            self._run_plan(first, event, effects)
            taken += first.transitions
            steps = 1
        select_eventless_now = True
        while state.status == ACTIVE:
            cfg = state.cfg
            plan = None
            if select_eventless_now and cfg.has_always:
                enabled = select_eventless(cfg.atomic, self._checker(event))
                if enabled:
                    plan = self._plan_for(enabled)
                    before = self._context_marker(plan)
                    self._run_plan(plan, event, effects)
                    # eventless transitions are selected again after one that
                    # changed the configuration, the history or the context
                    # (whatever else it did: raised, armed, emitted); XState
                    # stops after one that left its snapshot unchanged
                    select_eventless_now = (
                        plan.new_cfg.mask != cfg.mask
                        or bool(plan.history_updates)
                        or self._context_changed(before)
                    )
            if plan is None:
                if not queue:
                    break
                event = queue.popleft()
                select_eventless_now = True
                if event.type.startswith(AFTER_PREFIX) and not state.consume_deadline(event.type):
                    continue
                found = select_transitions(root, cfg.mask, event.type, self._checker(event))
                if not found:
                    continue
                plan = self._plan_for(found)
                self._run_plan(plan, event, effects)
            steps += 1
            if steps > limit:
                raise MicrostepLimitError(limit, state_ids=state.cfg.state_ids)
            taken += plan.transitions
        return taken
