"""How a block runs its plugins' observer hooks ``phase`` and
``on_replay``: a hook's error is logged, never raised, and never replaces
nor suppresses the block's own exception.

A block decides once, when it is built, which of its plugins override
them (``overriding`` in :mod:`.instance`); one none of whose plugins does
enters the shared null context :data:`NO_PHASE` around each phase and
calls nothing else.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Protocol

from django_xsm.engine import to_event

__all__ = ["NO_PHASE", "PhaseHook", "ReplayHook", "notify_replay", "phase_of"]

logger = logging.getLogger("django_xsm.persistence")

#: What a block enters around a phase when none of its plugins observes it.
NO_PHASE: AbstractContextManager[None] = contextlib.nullcontext()


class PhaseHook(Protocol):
    def phase(self, block: Any, name: str, event_type: str) -> AbstractContextManager[None]: ...


class ReplayHook(Protocol):
    def on_replay(self, block: Any, event_type: str, receipt: Any) -> None: ...


class _Phase:
    """Phase ``name`` of ``block`` around the ``phase`` hooks of ``hooks``:
    a hook that fails to enter or to exit is logged and skipped; the
    phase's exception is never replaced nor suppressed."""

    __slots__ = ("block", "entered", "event_type", "hooks", "name")

    def __init__(
        self, hooks: tuple[PhaseHook, ...], block: Any, name: str, event_type: str
    ) -> None:
        self.hooks = hooks
        self.block = block
        self.name = name
        self.event_type = event_type
        self.entered: list[tuple[PhaseHook, AbstractContextManager[None]]] = []

    def __enter__(self) -> None:
        for hook in self.hooks:
            try:
                manager = hook.phase(self.block, self.name, self.event_type)
                manager.__enter__()
            except Exception:
                logger.exception("phase hook %r failed for %r", hook, self.block.key)
                continue
            self.entered.append((hook, manager))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for hook, manager in reversed(self.entered):
            try:
                manager.__exit__(exc_type, exc, tb)
            except Exception:
                logger.exception("phase hook %r failed for %r", hook, self.block.key)


def phase_of(
    hooks: tuple[PhaseHook, ...], block: Any, name: str, event: object = None
) -> AbstractContextManager[None]:
    """What ``block`` enters around phase ``name`` (``event``: the sent
    event, for a ``"send"``): a shared null context when none of ``hooks``
    observes phases."""
    if not hooks:
        return NO_PHASE
    return _Phase(hooks, block, name, _event_type(event) if name == "send" else "")


def notify_replay(hooks: tuple[ReplayHook, ...], block: Any, event_type: str, receipt: Any) -> None:
    for hook in hooks:
        try:  # an observer must not change what the block does
            hook.on_replay(block, event_type, receipt)
        except Exception:
            logger.exception("on_replay hook %r failed for %r", hook, block.key)


def _event_type(event: object) -> str:
    try:
        return to_event(event, None).type
    except Exception:
        return ""  # the send itself raises the error
