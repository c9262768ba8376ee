"""One process-wide observer of the microsteps the engine runs.

Chart coverage (``pytest --xsm-coverage``, :mod:`django_xsm.testing`)
counts the states entered and the transitions taken with it. It is
``None`` unless something sets it, and then costs one check per microstep
of the general path; the fast path of ``send()`` (a cached transition that
only runs actions) is not offered while an observer is set, so every step
reaches it (plans cached before it was set keep their fast path: set it
before the machines run).

The observer is called as ``observer(program, transitions, entered)``
after each microstep: the :class:`~.program.Program` (the
:class:`~django_xsm.engine.Machine`), the transitions the microstep took
(empty for the initial one) and the states it entered as a mask of their
``bit`` (the initial microstep enters the root). A microstep is reported once its
actions ran: one whose action raised is not, the microsteps its send ran
before it are (the send is rolled back all the same). The observer must
not raise nor call back into the engine's instances: it only counts.
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
