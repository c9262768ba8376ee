"""One process-wide observer of the microsteps the engine runs (what chart
coverage counts with); its contract is docs/engine.md, ``observe_steps``.

It costs one check per microstep of the general path; while one is set,
``send()`` offers no new fast path, but plans cached before it was set keep
theirs: set it before the machines run. A microstep whose action raised is
not reported; the ones its send ran before it are (the send is rolled back
all the same). The observer must not raise nor call back into the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django_xsm.engine.chart.model import Transition

if TYPE_CHECKING:
    from .program import Program

__all__ = ["StepObserver", "current", "observe_steps"]

#: ``observer(program, transitions, entered)`` (see the module docstring).
StepObserver = Callable[["Program", tuple[Transition, ...], int], None]

#: The observer set by :func:`observe_steps` (read by the stepper).
current: StepObserver | None = None


def observe_steps(observer: StepObserver | None) -> StepObserver | None:
    """Make ``observer`` see every microstep from now on (None: none);
    returns the one it replaces."""
    global current
    previous, current = current, observer
    return previous
