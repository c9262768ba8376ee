"""A running machine: :class:`Instance` (live actions) and the shared runtime
used by the pure ``Machine.transition()``.

``send()`` has a fast path for the common case — the event's selection is
cached on the configuration, no guard is involved, the microstep only calls
actions and nothing follows it — and otherwise runs the general macrostep
(:func:`steps.macrostep`). Either way a failing action, guard or the
microstep cap leaves the instance exactly as before the send (context
included: it is restored in place from the copy taken to detect changes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django_xsm.exceptions import EventNotAcceptedError, InvalidConfigError, ReentrantSendError

from .chart.model import Action, Guard, StateNode
from .events import AFTER_PREFIX, Event, to_event
from .run.configuration import Configuration
from .run.context import copy_data
from .run.deadlines import Deadline, delay_ms
from .run.results import ActionCall, Receipt
from .run.selection import Guarded, select_transitions, uses_history
from .run.steps import MicroPlan, compute_plan, macrostep, plan_for

if TYPE_CHECKING:
    from .machine import Machine

__all__ = ["Core", "Instance"]

ACTIVE = "active"
DONE = "done"


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_DYNAMIC = _Marker("DYNAMIC")  # cached: guards or deadlines decide each time
_UNCHANGED = _Marker("UNCHANGED")


class Core:
    """Runtime state and the hooks the step functions call."""

    __slots__ = (
        "_busy",
        "_cfg",
        "_clock",
        "_collect",
        "_ctx",
        "_deadlines",
        "_hist",
        "_m",
        "_now",
        "_seq",
        "_status",
        "_step_now",
    )

    _m: Machine
    _busy: bool
    _cfg: Configuration
    _hist: dict[str, tuple[StateNode, ...]]
    _deadlines: tuple[Deadline, ...]
    _seq: int
    _status: str
    _ctx: dict[str, Any]
    _clock: Callable[[], int] | None
    _now: int
    _step_now: int | None
    _collect: list[ActionCall] | None

    def _call(self, action: Action, event: Event) -> None:
        collect = self._collect
        if collect is None:
            action.fn(self, self._ctx, event, action)  # type: ignore[misc]
        else:
            collect.append(ActionCall(action.type, action.params, event))

    def _guard(self, guard: Guard, event: Event) -> bool:
        if guard.wants_params:
            return bool(guard.fn(self._ctx, event, guard.params))
        return bool(guard.fn(self._ctx, event))

    def _checker(self, event: Event) -> Callable[[Guard], bool]:
        return lambda guard: self._guard(guard, event)

    def _time(self) -> int:
        """``now`` for this step: the clock is read at most once per send."""
        now = self._step_now
        if now is None:
            if self._clock is not None:
                raw = self._clock()
                if isinstance(raw, bool) or not isinstance(raw, int | float):
                    raise InvalidConfigError(
                        f"The clock returned {raw!r}, not int milliseconds",
                        path="clock",
                        hint="clock=lambda: int(time.time() * 1000)",
                    )
                self._now = int(raw)
            now = self._step_now = self._now
        return now

    def _arm(self, node: StateNode, event: Event) -> None:
        now = self._time()
        seq = self._seq = self._seq + 1
        armed = []
        for delay, event_type, amount in node.delays:
            ms = amount if type(amount) is int else delay_ms(delay, amount, self._ctx, event)
            armed.append(Deadline(node.id, seq, now + ms, event_type, delay))
        self._deadlines = self._deadlines + tuple(armed)

    def _held(self, event_type: str) -> Deadline | None:
        for d in self._deadlines:
            if d.event_type == event_type:
                return d
        return None

    def _consume_deadline(self, event_type: str) -> bool:
        held = self._held(event_type)
        if held is None:
            return False
        self._deadlines = tuple(d for d in self._deadlines if d is not held)
        return True

    def _context_marker(self, plan: MicroPlan) -> Any:
        if self._collect is None and plan.simple and plan.has_calls:
            return copy_data(self._ctx)
        return _UNCHANGED

    def _context_changed(self, marker: Any) -> bool:
        return marker is not _UNCHANGED and marker != self._ctx

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
                found = select_transitions(self._m.root, cfg.mask, event_type, None)
            except Guarded:
                entry = _DYNAMIC
            else:
                if not found:
                    entry = Receipt(event_type, False, False, ACTIVE, cfg, ())
                elif any(uses_history(t) for t in found):
                    entry = tuple(found)
                else:
                    plan = compute_plan(self._m, cfg, found, self._hist)
                    entry = tuple(found) if plan.uses_history else plan
                    if plan.simple:
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
            return plan_for(self, list(entry))
        found = select_transitions(self._m.root, cfg.mask, event.type, self._checker(event))
        if not found:
            return None
        return plan_for(self, found)


class Instance(Core):
    """A live machine instance. Create with ``machine.start()`` or
    ``machine.restore(snapshot)``; see the module docs of
    :mod:`django_xsm.engine` for the semantics."""

    __slots__ = ()

    @property
    def machine(self) -> Machine:
        return self._m

    @property
    def value(self) -> Any:
        """The XState state value (a fresh copy)."""
        return self._cfg.value()

    @property
    def state_ids(self) -> tuple[str, ...]:
        """Full ids of every active state, root first, document order."""
        return self._cfg.state_ids

    @property
    def context(self) -> dict[str, Any]:
        """The live context dict (actions mutate it)."""
        return self._ctx

    @property
    def status(self) -> str:
        """``"active"`` or ``"done"`` (a root final state was reached)."""
        return self._status

    @property
    def deadlines(self) -> tuple[Deadline, ...]:
        return self._deadlines

    @property
    def history(self) -> dict[str, tuple[str, ...]]:
        """Recorded history per history state id (state ids)."""
        return {h: tuple(n.id for n in nodes) for h, nodes in self._hist.items()}

    def matches(self, state_id: str) -> bool:
        """Is this state active? Accepts ``"paid"``, ``"order.paid"``,
        nested ``"a.b"`` relative to the root, full ids and ``"#id"``;
        unknown names are simply not active."""
        node = self._m._match_index.get(state_id)
        return node is not None and bool(self._cfg.mask & node.bit)

    def can(self, event_or_type: object, /, **payload: Any) -> bool:
        """Would ``send()`` take a transition? Guards are evaluated; nothing
        runs and nothing changes."""
        event = to_event(event_or_type, payload)
        if self._status != ACTIVE:
            return False
        etype = event.type
        if etype.startswith(AFTER_PREFIX) and self._held(etype) is None:
            return False
        found = select_transitions(self._m.root, self._cfg.mask, etype, self._checker(event))
        return bool(found)

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready dict (see ``snapshot_of``); shares nothing mutable."""
        from .run.snapshot import snapshot_of

        return snapshot_of(self)

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
        cfg = self._cfg
        if self._status != ACTIVE:
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
            ctx = self._ctx
            before = copy_data(ctx)
            self._busy = True
            try:
                for action in entry.actions:
                    action.fn(self, ctx, event, action)  # type: ignore[misc]
            except BaseException:
                ctx.clear()
                ctx.update(before)
                raise
            finally:
                self._busy = False
            return entry.receipts[ctx != before]
        if type(entry) is Receipt:  # refused here, whatever the guards say
            if strict:
                raise EventNotAcceptedError(etype, value=cfg.value())
            return entry
        return self._send_general(
            event if event is not None else Event(etype, payload), entry, strict
        )

    def _refuse(self, etype: str, strict: bool) -> Receipt:
        if strict:
            raise EventNotAcceptedError(etype, value=self._cfg.value())
        return Receipt(etype, False, False, self._status, self._cfg, ())

    def _send_general(self, event: Event, entry: Any, strict: bool) -> Receipt:
        etype = event.type
        cfg = self._cfg
        held = self._held(etype) if etype.startswith(AFTER_PREFIX) else None
        if held is None and etype.startswith(AFTER_PREFIX):
            return self._refuse(etype, strict)  # stale or unknown timer
        saved = (cfg, self._hist, self._deadlines, self._seq, self._status, self._now)
        ctx = self._ctx
        before: Any = copy_data(ctx) if self._collect is None else _UNCHANGED
        self._step_now = None
        self._busy = True
        try:
            plan = self._resolve(cfg, entry, event)
            if plan is None:
                if strict:
                    raise EventNotAcceptedError(etype, value=cfg.value())
                if held is not None:  # a due timer whose guards refused: consumed
                    self._consume_deadline(etype)
                    return Receipt(etype, False, True, self._status, cfg, ())
                return Receipt(etype, False, False, self._status, cfg, ())
            if held is not None:
                self._consume_deadline(etype)
            taken = macrostep(self, event, plan)
        except BaseException:
            (
                self._cfg,
                self._hist,
                self._deadlines,
                self._seq,
                self._status,
                self._now,
            ) = saved
            if before is not _UNCHANGED:
                ctx.clear()
                ctx.update(before)
            raise
        finally:
            self._busy = False
        # changed == the snapshot differs (cheapest comparisons first)
        changed = (
            self._cfg.mask != cfg.mask
            or self._deadlines != saved[2]
            or self._seq != saved[3]
            or self._status != saved[4]
            or self._hist != saved[1]
            or (before is not _UNCHANGED and ctx != before)
        )
        return Receipt(etype, True, changed, self._status, self._cfg, tuple(taken))

    def __repr__(self) -> str:
        return f"<Instance {self._m.id!r} value={self.value!r} status={self._status!r}>"
