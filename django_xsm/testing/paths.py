"""Shortest paths: for every state a chart can reach, the fewest steps that
reach it from its initial state (as ``@xstate/graph``'s
``getShortestPaths``), to parametrize a test over::

    from django_xsm.registry import machines
    from django_xsm.testing import shortest_paths

    PATHS = shortest_paths(machines["order"].machine, guards={"hasItems": True})

    @pytest.mark.parametrize("path", PATHS, ids=str)
    def test_every_state_is_reachable(xsm, path): ...

A breadth-first search over configurations (the set of active states; the
context is not part of a state here): from each one it sends every event
type the chart names outside ``xstate.*`` (with the payload ``events=``
gives it) and fires every timer the state armed, on instances of a copy of
the machine whose guards named in ``guards=`` answer as told (``True``,
``False`` or a function of the context and the event); other guards run as
written, on the context the actions left. Actions run, as in the engine.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine import Machine, MachineLogic, create_machine
from django_xsm.engine.events import is_wildcard
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError, XsmError

__all__ = ["Path", "Step", "shortest_paths"]

#: The engine's reserved namespace of events it raises itself (after, done).
_INTERNAL = "xstate."


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a path: send ``event`` (with ``payload``), or, when
    ``after_ms`` is set, let that many milliseconds pass in the state that
    armed the timer ``event`` (``xsm.advance(step.after_ms / 1000)``)."""

    event: str
    payload: Mapping[str, Any]
    after_ms: int | None = None

    def __str__(self) -> str:
        return self.event if self.after_ms is None else f"after {self.after_ms}ms"


@dataclass(frozen=True, slots=True)
class Path:
    """The fewest steps from the initial state to ``state`` (the state
    value; ``state_ids`` its active states); no steps for the initial state."""

    state: Any
    state_ids: tuple[str, ...]
    steps: tuple[Step, ...]

    @property
    def events(self) -> tuple[str, ...]:
        return tuple(step.event for step in self.steps)

    def __str__(self) -> str:
        state = self.state if isinstance(self.state, str) else json.dumps(self.state)
        return f"{state} <- {' > '.join(map(str, self.steps))}" if self.steps else state


def _guard(name: str, answer: object) -> Callable[..., Any]:
    if isinstance(answer, bool):
        return lambda context, event: answer
    if callable(answer):
        return answer
    raise ArgumentTypeError(f"guards[{name!r}]", answer, expected="True, False or a function")


def _thaw(value: Any) -> Any:
    """A compiled machine's frozen config (read-only mappings, tuples) as
    the JSON-like dicts and lists a config is written in."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


def _copy_with_guards(machine: Machine, guards: Mapping[str, object]) -> Machine:
    if not guards:
        return machine
    known = sorted({t.guard_name for t in machine.transitions if t.guard_name})
    unknown = sorted(str(name) for name in guards if name not in known)
    if unknown:
        raise InvalidConfigError(
            f"guards names no guard of machine {machine.id!r}: {', '.join(map(brief, unknown))}",
            path="guards",
            hint=f"the chart's guards: {', '.join(known) or 'none'}",
        )
    logic = machine.logic
    replaced = {name: _guard(name, answer) for name, answer in guards.items()}
    return create_machine(
        _thaw(machine.config),
        logic=MachineLogic(
            actions=logic.actions, guards={**logic.guards, **replaced}, delays=logic.delays
        ),
        version=machine.version,
        max_microsteps=machine.max_microsteps,
    )


def shortest_paths(
    machine: Machine,
    *,
    guards: Mapping[str, bool | Callable[..., Any]] | None = None,
    events: Mapping[str, Mapping[str, Any] | None] | None = None,
    context: Mapping[str, Any] | None = None,
) -> list[Path]:
    """For every reachable configuration, the shortest path to it, nearest
    first (see the module docstring). ``events``: a payload per event type
    (actions and guards read them), None for a type never to send;
    ``context``: the initial context (default: the chart's). An action that
    raises stops the search with an ``InvalidConfigError`` naming the state
    and the event (give its payload, or leave it out, with ``events=``)."""
    if not isinstance(machine, Machine):
        raise ArgumentTypeError("machine", machine, expected="a Machine (machines[name].machine)")
    payloads = dict(events or {})
    for name, payload in payloads.items():
        if payload is not None and not isinstance(payload, Mapping):
            raise ArgumentTypeError(
                f"events[{name!r}]", payload, expected="a dict (the payload) or None (never sent)"
            )
    copy = _copy_with_guards(machine, dict(guards or {}))
    sendable = [
        e
        for e in copy.events
        if not e.startswith(_INTERNAL) and not is_wildcard(e) and payloads.get(e, {}) is not None
    ]

    def clock() -> int:
        return 0  # deadlines then say how long after their state's entry they fire

    first = copy.start(dict(context) if context is not None else None, clock=clock)
    found = {first.state_ids: Path(first.value, first.state_ids, ())}
    queue: deque[tuple[dict[str, Any], tuple[Step, ...]]] = deque([(first.snapshot(), ())])
    while queue:
        snapshot, steps = queue.popleft()
        probe = copy.restore(snapshot, clock=clock)
        if probe.status != "active":
            continue
        moves = [Step(e, dict(payloads.get(e) or {})) for e in sendable]
        moves += [Step(d.event_type, {}, d.due_ms) for d in probe.deadlines]
        for step in moves:
            instance = copy.restore(snapshot, clock=clock)
            try:
                receipt = instance.send(step.event, **step.payload)
            except XsmError:
                raise
            except Exception as exc:
                raise InvalidConfigError(
                    f"sending {step.event!r} in state {brief(probe.value)} raised "
                    f"{type(exc).__name__}: {exc}",
                    path=f"events[{step.event!r}]",
                    hint="give the event the payload its actions and guards read with "
                    f"events=, or leave it out with events={{{step.event!r}: None}}",
                ) from exc
            if not receipt.accepted or instance.state_ids in found:
                continue
            path = (*steps, step)
            found[instance.state_ids] = Path(instance.value, instance.state_ids, path)
            queue.append((instance.snapshot(), path))
    return list(found.values())
