"""Value objects returned by the engine: :class:`Receipt`,
:class:`ActionCall` and :class:`TransitionResult`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.engine.chart.model import Frozen, Transition
from django_xsm.engine.events import Event

from .configuration import Configuration

__all__ = ["ActionCall", "Receipt", "TransitionResult"]


class Receipt(Frozen):
    """What one ``send()`` did (immutable; the fields are docs/engine.md,
    "Receipt"). Receipts of the fast path are built once per configuration
    and event type and then reused; ``value`` is a fresh copy each time.
    The ``emitted`` events are delivered by nobody here (``persisted()``
    writes them to the outbox with its commit)."""

    __slots__ = (
        "_cfg",
        "accepted",
        "changed",
        "emitted",
        "event_type",
        "status",
        "transitions",
    )

    event_type: str
    accepted: bool
    changed: bool
    status: str
    transitions: tuple[Transition, ...]
    emitted: tuple[dict[str, Any], ...]
    _cfg: Configuration

    def __init__(
        self,
        event_type: str,
        accepted: bool,
        changed: bool,
        status: str,
        cfg: Configuration,
        transitions: tuple[Transition, ...],
        emitted: tuple[dict[str, Any], ...] = (),
    ) -> None:
        self._init_fields(
            event_type=event_type,
            accepted=accepted,
            changed=changed or bool(emitted),
            status=status,
            _cfg=cfg,
            transitions=transitions,
            emitted=emitted,
        )

    @property
    def value(self) -> Any:
        return self._cfg.value()

    @property
    def state_ids(self) -> tuple[str, ...]:
        return self._cfg.state_ids

    def __repr__(self) -> str:
        return (
            f"Receipt(event_type={self.event_type!r}, accepted={self.accepted}, "
            f"changed={self.changed}, value={self.value!r}, status={self.status!r})"
        )


class ActionCall(Frozen):
    """An action to run, as produced by the pure ``Machine.transition()``:
    ``type`` (the action name), ``params`` (read-only mapping or ``None``)
    and ``event`` (the :class:`Event` that caused it)."""

    __slots__ = ("event", "params", "type")

    type: str
    params: Mapping[str, Any] | None
    event: Event

    def __init__(self, type: str, params: Mapping[str, Any] | None, event: Event) -> None:
        self._init_fields(type=type, params=params, event=event)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "params": dict(self.params) if self.params is not None else None,
            "event": self.event.to_dict(),
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActionCall):
            return NotImplemented
        return (self.type, self.params, self.event) == (other.type, other.params, other.event)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ActionCall({self.type!r}, params={self.params!r}, event={self.event!r})"


class TransitionResult:
    """Result of the pure ``Machine.transition()`` / ``initial_snapshot()``
    (docs/engine.md, "TransitionResult and ActionCall"); ``snapshot`` is new
    and shares nothing with the input."""

    __slots__ = ("accepted", "actions", "changed", "emitted", "snapshot", "transitions")

    snapshot: dict[str, Any]
    actions: tuple[ActionCall, ...]
    accepted: bool
    changed: bool
    transitions: tuple[Transition, ...]
    emitted: tuple[dict[str, Any], ...]

    def __init__(
        self,
        snapshot: dict[str, Any],
        actions: tuple[ActionCall, ...],
        accepted: bool,
        changed: bool,
        transitions: tuple[Transition, ...],
        emitted: tuple[dict[str, Any], ...] = (),
    ) -> None:
        self.snapshot = snapshot
        self.actions = actions
        self.accepted = accepted
        self.changed = changed or bool(emitted)
        self.transitions = transitions
        self.emitted = emitted

    def __repr__(self) -> str:
        return (
            f"TransitionResult(accepted={self.accepted}, changed={self.changed}, "
            f"value={self.snapshot.get('value')!r}, "
            f"actions={[a.type for a in self.actions]!r})"
        )
