"""The runtime state of one instance (:class:`RunState`) and its statuses.

Everything a snapshot records lives here: the configuration, the context,
the recorded history, the armed deadlines, the entry sequence number and
the status, plus ``now`` (the time of the last step). The step functions
change it only through the methods below, so every change a microstep can
make has one name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django_xsm.engine.chart.model import StateNode

from .configuration import Configuration
from .deadlines import Deadline

__all__ = ["ACTIVE", "DONE", "STATUSES", "RunState", "Saved"]

ACTIVE = "active"
DONE = "done"  # a top-level final state was reached
STATUSES = (ACTIVE, DONE)

History = dict[str, tuple[StateNode, ...]]
# (configuration, history, deadlines, entry seq, status, now): see RunState.save()
Saved = tuple[Configuration, History, tuple[Deadline, ...], int, str, int]


class RunState:
    """Configuration, context, history, deadlines, entry sequence number,
    status and ``now`` of one instance.

    ``history`` maps a history state id to the nodes it recorded; it and
    ``deadlines`` are replaced, never mutated, so :meth:`save` is a cheap
    tuple. ``context`` is the live dict actions mutate.
    """

    __slots__ = ("cfg", "context", "deadlines", "history", "now", "seq", "status")

    def __init__(
        self,
        cfg: Configuration,
        context: dict[str, Any],
        *,
        history: History | None = None,
        deadlines: tuple[Deadline, ...] = (),
        seq: int = 0,
        status: str = ACTIVE,
        now: int = 0,
    ) -> None:
        self.cfg = cfg
        self.context = context
        self.history: History = {} if history is None else history
        self.deadlines = deadlines
        self.seq = seq
        self.status = status
        self.now = now

    # -- a microstep's changes ----------------------------------------------

    def move_to(self, cfg: Configuration) -> None:
        self.cfg = cfg

    def record_history(self, updates: Mapping[str, tuple[StateNode, ...]]) -> None:
        self.history = {**self.history, **updates}

    def set_time(self, now: int) -> None:
        self.now = now

    def arm(self, state_id: str, now: int, delays: Iterable[tuple[int, str, str]]) -> None:
        """Arm ``(ms, event type, delay)`` deadlines of one state entry,
        under a fresh entry sequence number."""
        seq = self.seq = self.seq + 1
        armed = tuple(
            Deadline(state_id, seq, now + ms, event, delay) for ms, event, delay in delays
        )
        self.deadlines = self.deadlines + armed

    def cancel_deadlines(self, state_ids: frozenset[str]) -> None:
        """Drop the deadlines armed by states that are exited."""
        self.deadlines = tuple(d for d in self.deadlines if d.state_id not in state_ids)

    def held(self, event_type: str) -> Deadline | None:
        """The armed deadline that sends ``event_type``, if any."""
        for d in self.deadlines:
            if d.event_type == event_type:
                return d
        return None

    def consume_deadline(self, event_type: str) -> bool:
        """Drop the deadline of ``event_type``; ``False`` when none is held
        (a stale or unknown timer)."""
        held = self.held(event_type)
        if held is None:
            return False
        self.deadlines = tuple(d for d in self.deadlines if d is not held)
        return True

    def finish(self) -> None:
        """The machine reached a top-level final state: no timer may fire."""
        self.status = DONE
        self.deadlines = ()

    # -- rollback and change detection --------------------------------------

    def save(self) -> Saved:
        return (self.cfg, self.history, self.deadlines, self.seq, self.status, self.now)

    def restore(self, saved: Saved) -> None:
        self.cfg, self.history, self.deadlines, self.seq, self.status, self.now = saved

    def reset_context(self, before: dict[str, Any]) -> None:
        """Put the context back in place (the dict object is kept: callers
        may hold it)."""
        ctx = self.context
        ctx.clear()
        ctx.update(before)

    def differs_from(self, saved: Saved) -> bool:
        """Would the snapshot differ from the state saved (context aside)?
        Cheapest comparisons first."""
        return (
            self.cfg.mask != saved[0].mask
            or self.deadlines != saved[2]
            or self.seq != saved[3]
            or self.status != saved[4]
            or self.history != saved[1]
        )
