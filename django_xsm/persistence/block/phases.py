"""How a block runs its plugins' observer hooks ``phase`` and
``on_replay``: a hook's error is logged, never raised, and never replaces
nor suppresses the block's own exception.

A block decides once, when it is built, which of its plugins override
them (``overriding`` in :mod:`.instance`); one none of whose plugins does
enters the shared null context :data:`NO_PHASE` around each phase and
calls nothing else.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import Any, Protocol

from django_xsm.engine import to_event
from django_xsm.persistence.observers import NO_OBSERVATION, notify, observed

__all__ = ["NO_PHASE", "PhaseHook", "ReplayHook", "notify_replay", "phase_of"]

logger = logging.getLogger("django_xsm.persistence")

#: What a block enters around a phase when none of its plugins observes it.
NO_PHASE = NO_OBSERVATION


class PhaseHook(Protocol):
    def phase(self, block: Any, name: str, event_type: str) -> AbstractContextManager[None]: ...


class ReplayHook(Protocol):
    def on_replay(self, block: Any, event_type: str, receipt: Any) -> None: ...


def phase_of(
    hooks: tuple[PhaseHook, ...], block: Any, name: str, event: object = None
) -> AbstractContextManager[None]:
    """What ``block`` enters around phase ``name`` (``event``: the sent
    event, for a ``"send"``): a shared null context when none of ``hooks``
    observes phases."""
    if not hooks:
        return NO_PHASE
    etype = _event_type(event) if name == "send" else ""
    return observed(hooks, lambda h: h.phase(block, name, etype), logger, "phase hook", block.key)


def notify_replay(hooks: tuple[ReplayHook, ...], block: Any, event_type: str, receipt: Any) -> None:
    notify(
        hooks,
        lambda h: h.on_replay(block, event_type, receipt),
        logger,
        "on_replay hook",
        block.key,
    )


def _event_type(event: object) -> str:
    try:
        return to_event(event, None).type
    except Exception:
        return ""  # the send itself raises the error
