"""Delayed-transition deadlines: time is data, never read from a clock here.

Entering a state with ``after`` arms one :class:`Deadline` per distinct
delay, all sharing a fresh entry sequence number (a monotonic counter kept
in the snapshot). Leaving the state cancels them; entering it again arms new
ones with a new sequence number. The ``xstate.after.<delay>.<state id>``
event is processed only while the instance holds that deadline, and
processing it consumes the deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.chart.logic import MAX_DELAY_MS
from django_xsm.engine.chart.model import Frozen
from django_xsm.engine.events import Event
from django_xsm.exceptions import InvalidConfigError

__all__ = ["Deadline", "delay_ms"]

#: Entry numbers and due times of a stored deadline fit a signed 64-bit
#: int (Redis scores, index values): a larger one is damage.
_INT64 = 2**63
_FIELDS = ("state_id", "entry", "due_ms", "event_type", "delay")  # of the dict form, in order


class Deadline(Frozen):
    """One armed delayed transition (frozen; docs/engine.md, "Deadline"):
    ``due_ms`` is absolute wall-clock time in int ms (``now + delay`` at
    entry), ``entry`` the sequence number of the state entry that armed it."""

    __slots__ = ("delay", "due_ms", "entry", "event_type", "state_id")

    state_id: str
    entry: int
    due_ms: int
    event_type: str
    delay: str

    def __init__(self, state_id: str, entry: int, due_ms: int, event_type: str, delay: str) -> None:
        self._init_fields(
            state_id=state_id, entry=entry, due_ms=due_ms, event_type=event_type, delay=delay
        )

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Deadline):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.to_dict().items())
        return f"Deadline({fields})"

    def to_dict(self) -> dict[str, Any]:
        return dict(zip(_FIELDS, self._key(), strict=True))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Deadline:
        """Inverse of :meth:`to_dict`; ``ValueError`` on a malformed dict."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a deadline must be a dict, got {type(data).__name__}")
        try:
            state_id, entry, due = data["state_id"], data["entry"], data["due_ms"]
            event_type, delay = data["event_type"], data["delay"]
        except KeyError as exc:
            raise ValueError(f"a deadline needs {brief(exc.args[0])}") from None
        for name, value, kind in (
            ("state_id", state_id, str),
            ("event_type", event_type, str),
            ("delay", delay, str),
            ("entry", entry, int),
            ("due_ms", due, int),
        ):
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"deadline {name} must be {kind.__name__}, got {brief(value)}")
            if isinstance(value, int) and not -_INT64 <= value < _INT64:
                raise ValueError(f"deadline {name} is out of range, got {brief(value)}")
        return cls(state_id, entry, due, event_type, delay)


def delay_ms(delay: str, amount: Any, context: dict[str, Any], event: Event) -> int:
    """Milliseconds for one ``after`` entry: a number, or a named delay's
    number or ``fn(context, event)`` result; rounded up to whole ms."""
    if callable(amount):
        fn: Callable[[dict[str, Any], Event], Any] = amount
        amount = fn(context, event)
    if (
        isinstance(amount, bool)
        or not isinstance(amount, int | float)
        or not 0 <= amount < MAX_DELAY_MS  # also false for NaN
    ):
        raise InvalidConfigError(
            f"Delay {brief(delay)} gave {brief(amount)}, not milliseconds in [0, 2**53)",
            path=f"logic.delays.{delay}",
            hint="return an int or float of milliseconds",
        )
    whole = int(amount)
    return whole if whole == amount else whole + 1
