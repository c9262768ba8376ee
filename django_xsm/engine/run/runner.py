"""One ``send()``: :class:`Runner`, the event API of an instance.

``send()`` has a fast path for the common case — the event's selection is
cached on the configuration, no guard is involved, the microstep only calls
actions and nothing follows it — and otherwise runs the general macrostep
(:class:`~.macrostep.Stepper`). Either way a failing action, guard or the
microstep cap leaves the instance exactly as before the send (context
included: it is restored in place from the copy taken to detect changes).
"""

from __future__ import annotations

from typing import Any

from django_xsm.engine.chart.model import Transition
from django_xsm.engine.events import AFTER_PREFIX, INIT_EVENT_TYPE, Event, to_event
from django_xsm.exceptions import EventNotAcceptedError, ReentrantSendError

from . import observe
from .configuration import Configuration
from .context import copy_data
from .macrostep import UNCHANGED, Marker, Stepper
from .microstep import MicroPlan, compute_plan
from .results import Receipt
from .selection import Guarded, refusal_reason, select_transitions, uses_history
from .state import ACTIVE

__all__ = ["Runner"]

_DYNAMIC = Marker("DYNAMIC")  # cached: guards or deadlines decide each time


class Runner(Stepper):
    """Start, ``send()`` and ``can()`` over a :class:`~.macrostep.Stepper`,
    with the selection cache and the rollback of a failed send."""

    __slots__ = ()

    # -- selection ---------------------------------------------------------

    def _selection(self, cfg: Configuration, event_type: str) -> Any:
        """Cached per configuration and event type: the :class:`Receipt` of a
        refused event, a :class:`MicroPlan` (static and history-free), a
        tuple of transitions (static, history-dependent) or ``_DYNAMIC``."""
        entry: Any
        if event_type.startswith(AFTER_PREFIX):
            entry = _DYNAMIC
        else:
            try:
                found = select_transitions(self._program.chart.root, cfg.mask, event_type, None)
            except Guarded:
                entry = _DYNAMIC
            else:
                if not found:
                    entry = Receipt(event_type, False, False, ACTIVE, cfg, ())
                elif any(uses_history(t) for t in found):
                    entry = tuple(found)
                else:
                    plan = compute_plan(self._program, cfg, found, self._state.history)
                    entry = tuple(found) if plan.uses_history else plan
                    # no fast path while an observer counts every step
                    if plan.simple and observe.current is None:
                        taken = plan.transitions
                        plan.receipts = (
                            Receipt(event_type, True, False, ACTIVE, cfg, taken),
                            Receipt(event_type, True, True, ACTIVE, cfg, taken),
                        )
        cfg.cache_selection(event_type, entry)
        return entry

    def _resolve(self, cfg: Configuration, entry: Any, event: Event) -> MicroPlan | None:
        if type(entry) is Receipt:
            return None
        if type(entry) is MicroPlan:
            return entry
        if type(entry) is tuple:
            return self._plan_for(list(entry))
        found = select_transitions(
            self._program.chart.root, cfg.mask, event.type, self._checker(event)
        )
        if not found:
            return None
        return self._plan_for(found)

    # -- the event API -------------------------------------------------------

    def _enter(self, initial: MicroPlan) -> list[Transition]:
        """Start: run the initial microstep (``xstate.init``) to completion."""
        self._emitted = []
        self._busy = True
        try:
            return self._macrostep(Event(INIT_EVENT_TYPE, {}), initial)
        finally:
            self._busy = False

    def refusal(self, event_type: str) -> tuple[str, tuple[str, ...]]:
        """Why ``event_type`` would take no transition now: ``("done", ())``
        for a finished instance, ``("no-transition", ())`` when no active
        state has one for it, else ``("guard-refused", guard names)``.
        Reads the chart only: no guard runs."""
        state = self._state
        if state.status != ACTIVE:
            return "done", ()
        return refusal_reason(self._program.chart.root, state.cfg.mask, event_type)

    def _not_accepted(self, event_type: str) -> EventNotAcceptedError:
        reason, guards = self.refusal(event_type)
        return EventNotAcceptedError(
            event_type, value=self._state.cfg.value(), reason=reason, guards=guards
        )

    def can(self, event_or_type: object, /, **payload: Any) -> bool:
        """Would ``send()`` take a transition? Guards are evaluated; nothing
        runs and nothing changes."""
        event = to_event(event_or_type, payload)
        state = self._state
        if state.status != ACTIVE:
            return False
        etype = event.type
        if etype.startswith(AFTER_PREFIX) and state.held(etype) is None:
            return False
        found = select_transitions(
            self._program.chart.root, state.cfg.mask, etype, self._checker(event)
        )
        return bool(found)

    def send(self, event_or_type: object, /, *, strict: bool = False, **payload: Any) -> Receipt:
        """Process one event to completion (a macrostep); see the module docs."""
        event: Event | None
        if type(event_or_type) is str and event_or_type:
            etype: str = event_or_type
            event = None
            if payload and "type" in payload:
                to_event(etype, payload)  # raises the clear InvalidEventError
        else:
            event = to_event(event_or_type, payload)
            etype = event.type
        if self._busy:
            raise ReentrantSendError(etype)
        state = self._state
        cfg = state.cfg
        if self._emitted:
            self._emitted = []
        if state.status != ACTIVE:
            return self._refuse(etype, strict)
        entry = cfg.selection.get(etype)
        if entry is None:
            entry = self._selection(cfg, etype)
        if (
            type(entry) is MicroPlan
            and entry.receipts is not None
            and not cfg.has_always
            and self._collect is None
        ):
            # fast path: only actions run, the configuration stays
            if event is None:
                event = Event(etype, payload)
            ctx = state.context
            before = copy_data(ctx)
            self._busy = True
            try:
                for action in entry.actions:
                    action.fn(self, ctx, event, action)  # type: ignore[misc]
            except BaseException:
                state.reset_context(before)
                self._emitted = []
                raise
            finally:
                self._busy = False
            if self._emitted:  # a cached receipt cannot carry them
                taken = entry.transitions
                return Receipt(etype, True, True, ACTIVE, cfg, taken, tuple(self._emitted))
            return entry.receipts[ctx != before]
        if type(entry) is Receipt:  # refused here, whatever the guards say
            if strict:
                raise self._not_accepted(etype)
            if not cfg.has_always:
                return entry
        return self._send_general(
            event if event is not None else Event(etype, payload), entry, strict
        )

    def _refuse(self, etype: str, strict: bool, consumed: bool = False) -> Receipt:
        state = self._state
        if strict:
            raise self._not_accepted(etype)
        return Receipt(etype, False, consumed, state.status, state.cfg, ())

    def _send_general(self, event: Event, entry: Any, strict: bool) -> Receipt:
        etype = event.type
        state = self._state
        cfg = state.cfg
        held = state.held(etype) if etype.startswith(AFTER_PREFIX) else None
        if held is None and etype.startswith(AFTER_PREFIX):
            return self._refuse(etype, strict)  # stale or unknown timer
        saved = state.save()
        ctx = state.context
        before: Any = copy_data(ctx) if self._collect is None else UNCHANGED
        self._step_now = None
        self._busy = True
        try:
            plan = self._resolve(cfg, entry, event)
            if plan is None and strict:
                raise self._not_accepted(etype)
            if held is not None:  # consumed, even when its guards refused
                state.consume_deadline(etype)
            if plan is None and not cfg.has_always:
                return self._refuse(etype, False, consumed=held is not None)
            # an event that enabled nothing still starts a macrostep: its
            # eventless transitions are selected again (XState)
            taken = self._macrostep(event, plan)
        except BaseException:
            state.restore(saved)
            if before is not UNCHANGED:
                state.reset_context(before)
            self._emitted = []
            raise
        finally:
            self._busy = False
        changed = state.differs_from(saved) or (before is not UNCHANGED and ctx != before)
        return Receipt(
            etype,
            plan is not None,
            changed,
            state.status,
            state.cfg,
            tuple(taken),
            tuple(self._emitted),
        )
