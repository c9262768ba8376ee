"""Timer bookkeeping shared by the block (commit) and the scanner.

A pending ``after`` deadline is indexed at its due time; one whose firing
failed is indexed at its next retry time instead, and a dead-lettered one
is not indexed at all until an operator acts. An instance the scanner
could not even open (unknown machine, failed migration) carries one
failure under :data:`INSTANCE_FAILURE` that holds back all its deadlines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .records import TimerFailure

__all__ = ["INSTANCE_FAILURE", "failure_key", "next_due_ms", "prune_failures"]

#: Failure key of an instance that could not be opened to fire anything.
INSTANCE_FAILURE = "*"


def failure_key(deadline: Any) -> str:
    """Identity of one armed deadline: entry sequence + event type."""
    return f"{deadline.entry}:{deadline.event_type}"


def next_due_ms(deadlines: Iterable[Any], failures: Mapping[str, TimerFailure]) -> int | None:
    """When a scanner should next look at the instance (None: never)."""
    blanket = failures.get(INSTANCE_FAILURE)
    if blanket is not None and blanket.dead:
        return None
    best: int | None = None
    for d in deadlines:
        failure = failures.get(failure_key(d))
        if failure is not None and failure.dead:
            continue
        due = int(d.due_ms) if failure is None else max(int(d.due_ms), failure.next_attempt_ms)
        if blanket is not None:
            due = max(due, blanket.next_attempt_ms)
        if best is None or due < best:
            best = due
    return best


def prune_failures(
    failures: Mapping[str, TimerFailure], deadlines: Iterable[Any]
) -> dict[str, TimerFailure]:
    """Failures whose deadline is still armed (the rest were left behind).
    Called after a successful commit, so an instance failure goes too."""
    live = {failure_key(d) for d in deadlines}
    return {k: v for k, v in failures.items() if k in live}
