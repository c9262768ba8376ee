"""The clock of a test: django-xsm's time, standing still until moved.

:class:`TestClock` starts at the wall-clock time of the test's start and
moves only when told to (``xsm.advance()``), so what a test sees does not
depend on how fast the machine runs it: a deadline one millisecond away
stays one millisecond away until the test moves the clock.
"""

from __future__ import annotations

import math

from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError

__all__ = ["TestClock", "milliseconds"]

#: The engine refuses clock readings from 2**53 ms on (about 285 000 years).
_LAST_MS = 2**53 - 1


def milliseconds(seconds: object) -> int:
    """``seconds`` (an int or a float, finite, at least 0) as whole
    milliseconds (rounded to the nearest)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ArgumentTypeError(
            "seconds", seconds, expected="an int or a float", hint="xsm.advance(3600)"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidConfigError(
            f"cannot move the clock by {seconds!r} seconds",
            path="seconds",
            hint="time only moves forward: pass a finite number of seconds >= 0",
        )
    if seconds > _LAST_MS / 1000:
        raise InvalidConfigError(
            f"cannot move the clock by {seconds!r} seconds",
            path="seconds",
            hint="the engine takes times up to 2**53 ms since the epoch: advance by less",
        )
    return round(seconds * 1000)


class TestClock:
    """Epoch milliseconds that stand still until moved forward.

    Call it for the time (``clock()``); :meth:`move_to` moves it (never
    backwards). ``xsm.advance()`` moves it for a test; this object only
    keeps the time.
    """

    __test__ = False  # not a test class, whatever its name says to pytest

    def __init__(self, start_ms: int) -> None:
        if isinstance(start_ms, bool) or not isinstance(start_ms, int):
            raise ArgumentTypeError("start_ms", start_ms, expected="an int (epoch ms)")
        if not 0 <= start_ms <= _LAST_MS:
            raise InvalidConfigError(f"start_ms {start_ms} is out of range", path="start_ms")
        self._now = start_ms

    def __call__(self) -> int:
        return self._now

    @property
    def now_ms(self) -> int:
        return self._now

    def later(self, ms: int) -> int:
        """The time ``ms`` milliseconds from now (the clock does not move);
        refused past what the engine takes (2**53 ms since the epoch)."""
        if ms > _LAST_MS - self._now:
            raise InvalidConfigError(
                f"the clock cannot move past {_LAST_MS} ms since the epoch",
                path="seconds",
                hint="advance by less",
            )
        return self._now + ms

    def move_to(self, ms: int) -> None:
        """Set the time to ``ms``; a time before the current one is refused
        (deadlines already fired would be due again)."""
        if ms < self._now:
            raise InvalidConfigError(
                f"the clock cannot go back from {self._now} to {ms}",
                path="ms",
                hint="time only moves forward",
            )
        self._now = self.later(ms - self._now)

    def __repr__(self) -> str:
        return f"TestClock({self._now})"
