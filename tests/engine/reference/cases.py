"""Reference cases: run one on ``django_xsm.engine`` and compare it with
XState's result (``xstate_cases.mjs`` computes that one).

A case is a dict::

    {"machine": <XState JSON config>,
     "steps": [{"event": "E1"} | {"event": {"type": "E1", "ok": true}} | {"advance": 100}],
     "max_microsteps": 200}

Guards and actions are named and declarative, so both sides run the same
logic: guards ``yes``, ``no``, ``even`` (``n`` is even), ``nlt`` / ``ngt``
(``n < v`` / ``n > v``, params ``{"v": ...}``), ``flag`` (the event's
``ok`` field); actions ``inc`` (``n += by``) and ``set`` (``n = v``), which
XState runs as ``assign``, the built-ins ``xstate.raise`` / ``xstate.emit``,
and any other name, which only records its call. Every call is recorded as
``[type, params, type of the event it saw]``.

A step's result: the external events it delivered (a send, or the timers an
``advance`` of the virtual clock fired, each with ``accepted``), the state
value, the context, the status, the recorded action calls, the emitted
events, the pending timers (``[event type, due ms]`` by due time), and
``error`` (``"loop"`` for the microstep cap; processing stops after an
error). :func:`compare` names the first field that differs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from django_xsm.engine import Event, Instance, Machine, MachineLogic, Receipt, create_machine
from django_xsm.engine.run.macrostep import Stepper
from django_xsm.engine.run.microstep import OP_CALL, MicroPlan
from django_xsm.exceptions import MicrostepLimitError
from tests.engine.microsteps import Before, illegal, watching

from .domains import departs

Case = dict[str, Any]
Step = dict[str, Any]

#: The fields of a step result both sides must agree on, in the order
#: :func:`compare` checks them.
#: Timers one ``advance`` may fire (a zero delay that re-arms itself never
#: ends); more is the error ``"timers"`` on both sides.
MAX_TIMERS = 20
FIELDS = ("error", "events", "value", "status", "context", "actions", "emitted", "timers")


def _guard(fn: Callable[[Any, Any, Any], bool]) -> Callable[[Any, Event, Any], bool]:
    def check(context: Any, event: Event, params: Any) -> bool:
        return fn(context, event, params)

    return check


GUARDS: dict[str, Callable[[Any, Event, Any], bool]] = {
    "yes": _guard(lambda c, e, p: True),
    "no": _guard(lambda c, e, p: False),
    "even": _guard(lambda c, e, p: c["n"] % 2 == 0),
    "nlt": _guard(lambda c, e, p: c["n"] < p["v"]),
    "ngt": _guard(lambda c, e, p: c["n"] > p["v"]),
    "flag": _guard(lambda c, e, p: bool(e.get("ok"))),
}

BUILTINS = ("xstate.raise", "xstate.emit")


def action_names(config: Any) -> set[str]:
    """Every action name a config uses (built-ins aside)."""
    names: set[str] = set()

    def actions(value: Any) -> None:
        for action in value if isinstance(value, list) else [value]:
            name = action if isinstance(action, str) else action["type"]
            if name not in BUILTINS:
                names.add(name)

    def transitions(value: Any) -> None:
        for t in value if isinstance(value, list) else [value]:
            if isinstance(t, dict) and "actions" in t:
                actions(t["actions"])

    def state(node: dict[str, Any]) -> None:
        for key in ("entry", "exit"):
            if key in node:
                actions(node[key])
        if isinstance(node.get("initial"), dict) and "actions" in node["initial"]:
            actions(node["initial"]["actions"])
        for key in ("on", "after"):
            for t in node.get(key, {}).values():
                transitions(t)
        for key in ("always", "onDone"):
            if key in node:
                transitions(node[key])
        for child in node.get("states", {}).values():
            state(child)

    state(config)
    return names


class Calls:
    """Where the recording actions of one run append their calls."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def take(self) -> list[list[Any]]:
        out, self.calls = self.calls, []
        return out

    def action(self, name: str) -> Callable[..., None]:
        def run(instance: Any, context: dict[str, Any], event: Event, action: Any) -> None:
            params = dict(action.params) if action.params is not None else None
            self.calls.append([name, params, event.type])
            if name == "inc":
                context["n"] += action.params["by"]
            elif name == "set":
                context["n"] = action.params["v"]

        return run


def build(case: Case) -> tuple[Machine, Calls]:
    """The engine's machine for a case, and where its actions record."""
    calls = Calls()
    config = case["machine"]
    logic = MachineLogic(
        actions={name: calls.action(name) for name in action_names(config)},
        guards=dict(GUARDS),
    )
    return create_machine(
        config, logic=logic, max_microsteps=case.get("max_microsteps", 1000)
    ), calls


class EngineRun:
    """One case on the engine, step by step (the harness keeps the instance
    so the predicates of :mod:`.differences` can look at it).

    Every microstep is watched: an illegal configuration is recorded in
    ``illegal``; a step result counts in ``quiet_assigns`` the eventless
    microsteps that ran an assign yet left the configuration, the history
    and the context as they were (the engine selects no eventless
    transition again after one; XState does), and lists in
    ``domain_departures`` the transitions it took whose domain differs
    from XState's (a history target, :mod:`.domains`)."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.machine, self.calls = build(case)
        self.now = 0
        self.instance: Instance | None = None
        self.history_before: dict[str, tuple[str, ...]] = {}
        self.illegal: str | None = None
        self.quiet_assigns = 0
        self.departures: list[list[Any]] = []

    def _clock(self) -> int:
        return self.now

    def _watch(self, stepper: Stepper, plan: MicroPlan, event: Event, before: Before) -> None:
        state = stepper._state
        problem = illegal(self.machine.nodes, state.cfg.nodes)
        if problem is not None and self.illegal is None:
            self.illegal = f"after {event.type}: {problem}"
        for t in plan.transitions:
            if departs(self.machine.root, t, before.history):
                self.departures.append([t.source_id, list(t.target_ids)])
        if (
            plan.transitions
            and all(t.kind == "always" for t in plan.transitions)
            and state.cfg.mask == before.cfg.mask
            and not plan.history_updates
            and state.context == before.context
            and any(kind == OP_CALL and action.type in ("inc", "set") for kind, action in plan.ops)
        ):
            self.quiet_assigns += 1

    def steps(self) -> Iterator[Step]:
        """The initial step's result, then one per step of the case; stops
        after an error."""
        try:
            with watching(self._watch):
                self.instance = self.machine.start(clock=self._clock)
        except MicrostepLimitError:
            yield self._result([], [], [], "loop")
            return
        yield self._result([], self.instance.last_emitted, [], None)
        for step in self.case["steps"]:
            self.history_before = self.instance.history
            events: list[dict[str, Any]] = []
            emitted: list[Any] = []
            taken: list[Any] = []
            error = None
            try:
                if "event" in step:
                    event = step["event"]
                    receipt = self._send(event)
                    etype = event if isinstance(event, str) else event["type"]
                    events.append({"type": etype, "accepted": receipt.accepted})
                    emitted += receipt.emitted
                    taken += receipt.transitions
                else:
                    until = self.now + step["advance"]
                    while True:
                        due = self._next_deadline(until)
                        if due is None:
                            break
                        if len(events) == MAX_TIMERS:
                            error = "timers"
                            break
                        self.now = due.due_ms
                        receipt = self._send(due.event_type)
                        events.append({"type": due.event_type, "accepted": receipt.accepted})
                        emitted += receipt.emitted
                        taken += receipt.transitions
                    if error is None:
                        self.now = until
            except MicrostepLimitError:
                error = "loop"
            yield self._result(events, emitted, taken, error)
            if error:
                return

    def _send(self, event: Any) -> Receipt:
        assert self.instance is not None
        with watching(self._watch):
            return self.instance.send(event)

    def _next_deadline(self, until: int) -> Any:
        assert self.instance is not None
        pending = [d for d in self.instance.deadlines if d.due_ms <= until]
        return min(pending, key=lambda d: d.due_ms) if pending else None

    def _result(
        self, events: list[dict[str, Any]], emitted: Any, taken: list[Any], error: str | None
    ) -> Step:
        quiet, self.quiet_assigns = self.quiet_assigns, 0
        departures, self.departures = self.departures, []
        instance = self.instance
        if instance is None or error:
            return {
                "events": events,
                "error": error,
                "actions": self.calls.take(),
                "quiet_assigns": quiet,
                "domain_departures": departures,
            }
        timers = sorted(instance.deadlines, key=lambda d: d.due_ms)  # stable: arm order
        return {
            "events": events,
            "value": instance.value,
            "context": copy.deepcopy(instance.context),
            "status": instance.status,
            "actions": self.calls.take(),
            "emitted": [dict(e) for e in emitted],
            "timers": [[d.event_type, d.due_ms] for d in timers],
            "transitions": [[t.source_id, list(t.target_ids)] for t in taken],
            "quiet_assigns": quiet,
            "domain_departures": departures,
            "error": error,
        }


def run_engine(case: Case) -> list[Step]:
    """Every step result of a case on the engine."""
    return list(EngineRun(case).steps())


def comparable(step: Step) -> dict[str, Any]:
    """The fields both sides must agree on; after an error only the error
    (the states a failed macrostep leaves differ by design: the engine
    rolls back, XState stops)."""
    if step.get("error"):
        return {"error": step["error"]}
    out = {key: step.get(key) for key in FIELDS}
    out["events"] = [[e["type"], e["accepted"]] for e in step["events"]]
    return out


def differing_field(ours: Step, theirs: Step) -> str | None:
    """The first field of :data:`FIELDS` two step results differ on."""
    a, b = comparable(ours), comparable(theirs)
    return next((key for key in FIELDS if a.get(key) != b.get(key)), None)


def compare(engine: list[Step], xstate: list[Step]) -> tuple[int, str] | None:
    """``None`` when both agree on every step, else ``(step index, field)``
    of the first difference (step 0 is the start)."""
    for index in range(max(len(engine), len(xstate))):
        if index >= len(engine) or index >= len(xstate):
            return index, "steps"
        field = differing_field(engine[index], xstate[index])
        if field is not None:
            return index, field
    return None
