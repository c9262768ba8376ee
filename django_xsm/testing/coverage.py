"""Chart coverage: the states the engine entered and the transitions it took.

:class:`ChartCoverage` is the engine's step observer
(:func:`django_xsm.engine.observe_steps`) while a test session runs with
``--xsm-coverage``: it counts what the engine actually did, whatever ran
it (views, the timer scanner, the outbox's compensations, the model
field, the pure ``Machine.transition()``). Counts are kept per chart
(machine id and structure hash), so a machine compiled again after a
settings change counts into the same chart. :meth:`ChartCoverage.measure`
turns them into a :class:`MachineCoverage` per registered machine, which
is plain data: the processes of ``pytest -n`` send theirs to the
controller, which merges them (:meth:`MachineCoverage.merge`).

States are every state but the root and history pseudo-states (never
active themselves), named by their key path (``paid.refunded``);
transitions are every transition of the chart, named
``source --EVENT--> target`` (``--after 1h-->``, ``--always-->``,
``--onDone-->``, a guard in brackets: ``--PAY [paysTotal]-->``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django_xsm.engine import Machine, StateNode, Transition, observe_steps
from django_xsm.engine.chart.model import HISTORY

__all__ = ["ChartCoverage", "MachineCoverage", "report_lines", "total_percent"]


def state_path(node: StateNode) -> str:
    """The key path of ``node`` below the root (``paid.refunded``)."""
    keys = [a.key for a in reversed(node.ancestors) if a.parent is not None]
    return ".".join([*keys, node.key])


def transition_label(transition: Transition) -> str:
    """``source --EVENT--> target`` (see the module docstring)."""
    kind = transition.kind
    if kind == "always" or not transition.event:
        event = "always"
    elif kind == "after":
        event = f"after {transition.delay}"
    elif kind == "onDone":
        event = "onDone"
    else:
        event = transition.event
    if transition.guard_name:
        event += f" [{transition.guard_name}]"
    targets = ", ".join(state_path(n) for n in transition.targets or ()) or "(no target)"
    return f"{state_path(transition.source)} --{event}--> {targets}"


@dataclass(frozen=True, slots=True)
class MachineCoverage:
    """One machine's coverage: ``states`` as ``(path, entered)`` and
    ``transitions`` as ``(id, label, taken)`` (the id is the transition's
    place in the chart, ``states.cart.on.PAY[0]``), in chart order."""

    name: str
    states: tuple[tuple[str, bool], ...]
    transitions: tuple[tuple[str, str, bool], ...]

    @property
    def states_entered(self) -> int:
        return sum(1 for _, entered in self.states if entered)

    @property
    def transitions_taken(self) -> int:
        return sum(1 for _, _, taken in self.transitions if taken)

    @property
    def never_entered(self) -> list[str]:
        return [path for path, entered in self.states if not entered]

    @property
    def never_taken(self) -> list[str]:
        return [label for _, label, taken in self.transitions if not taken]

    def merge(self, other: MachineCoverage) -> MachineCoverage:
        """What either saw (the same chart counted in two processes)."""
        entered = {path for path, seen in (*self.states, *other.states) if seen}
        taken = {tid for tid, _, seen in (*self.transitions, *other.transitions) if seen}
        return MachineCoverage(
            self.name,
            tuple((path, path in entered) for path, _ in self.states),
            tuple((tid, label, tid in taken) for tid, label, _ in self.transitions),
        )

    def to_data(self) -> dict[str, Any]:
        """JSON-ready (what a ``pytest -n`` worker sends)."""
        return {
            "name": self.name,
            "states": [[p, e] for p, e in self.states],
            "transitions": [[i, lbl, t] for i, lbl, t in self.transitions],
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> MachineCoverage:
        return cls(
            str(data["name"]),
            tuple((str(p), bool(e)) for p, e in data["states"]),
            tuple((str(i), str(lbl), bool(t)) for i, lbl, t in data["transitions"]),
        )


@dataclass(slots=True)
class _Seen:
    entered: int = 0  # a mask of node bits
    taken: set[str] = field(default_factory=set)  # transition paths


class ChartCoverage:
    """Counts what the engine did (see the module docstring). :meth:`start`
    makes it the engine's step observer; :meth:`stop` puts the previous
    one back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], _Seen] = {}
        self._previous: Any = None

    def start(self) -> None:
        self._previous = observe_steps(self.observe)

    def stop(self) -> None:
        observe_steps(self._previous)

    def observe(self, program: Any, transitions: tuple[Transition, ...], entered: int) -> None:
        """The engine's step observer: one microstep of ``program``."""
        chart = program.chart
        key = (chart.id, chart.structure_hash)
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                seen = self._seen[key] = _Seen()
            seen.entered |= entered
            for transition in transitions:
                seen.taken.add(transition.path)

    def measure(self, machines: Iterable[tuple[str, Machine]]) -> list[MachineCoverage]:
        """The coverage of each ``(name, machine)`` from what was counted."""
        found = []
        for name, machine in machines:
            with self._lock:
                seen = self._seen.get((machine.id, machine.structure_hash)) or _Seen()
                entered, taken = seen.entered, set(seen.taken)
            states = tuple(
                (state_path(n), bool(entered & n.bit))
                for n in machine.nodes
                if n.parent is not None and n.type != HISTORY
            )
            transitions = tuple(
                (t.path, transition_label(t), t.path in taken) for t in machine.transitions
            )
            found.append(MachineCoverage(name, states, transitions))
        return found


def merge_all(parts: Iterable[Sequence[MachineCoverage]]) -> list[MachineCoverage]:
    """One coverage per machine name from several processes' lists."""
    merged: dict[str, MachineCoverage] = {}
    for part in parts:
        for item in part:
            known = merged.get(item.name)
            merged[item.name] = item if known is None else known.merge(item)
    return list(merged.values())


def _percent(part: int, whole: int) -> float:
    return 100.0 if whole == 0 else 100.0 * part / whole


def total_percent(found: Sequence[MachineCoverage]) -> float:
    """Transitions taken over all transitions, in percent (100 for none)."""
    taken = sum(m.transitions_taken for m in found)
    return _percent(taken, sum(len(m.transitions) for m in found))


def report_lines(found: Sequence[MachineCoverage]) -> list[str]:
    """The report: per machine, its counts and what was never entered or taken."""
    lines = []
    for m in found:
        states, transitions = len(m.states), len(m.transitions)
        lines.append(
            f"{m.name}: states {m.states_entered}/{states} "
            f"({_percent(m.states_entered, states):.1f}%), transitions "
            f"{m.transitions_taken}/{transitions} "
            f"({_percent(m.transitions_taken, transitions):.1f}%)"
        )
        lines += [f"  never entered: {path}" for path in m.never_entered]
        lines += [f"  never taken: {label}" for label in m.never_taken]
    taken = sum(m.transitions_taken for m in found)
    total = sum(len(m.transitions) for m in found)
    lines.append(f"total: transitions {taken}/{total} ({total_percent(found):.1f}%)")
    return lines
