"""Durable, concurrent-safe state for engine instances (stdlib only).

``persisted()`` / ``apersisted()`` wrap one instance in a load → send →
commit block; stores, inboxes and logs implement the protocols in
:mod:`django_xsm.persistence.base`. The backends live in
:mod:`django_xsm.redis`; ``MemoryStore``, ``MemoryInbox`` and ``MemoryLog``
(the Redis ones over an in-process fakeredis) are importable from here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .audit import DEFAULT_REDACT, AuditPlugin, redact, replay
from .base import (
    AsyncInboxStore,
    AsyncStateStore,
    AsyncTransitionLogStore,
    Codec,
    InboxStore,
    StateStore,
    TransitionLogStore,
)
from .block import BlockOptions, PersistedInstance, Plugin, apersisted, persisted
from .codecs import FernetCodec, JsonCodec
from .idempotency import IdempotencyPlugin, ReplayedReceipt
from .locks import (
    AdaptiveLock,
    OptimisticLock,
    PessimisticLock,
    StoreLock,
    aretry_on_conflict,
    retry_on_conflict,
)
from .records import (
    ClaimOutcome,
    ClaimRequest,
    ClaimStatus,
    CommitResult,
    CommitUnit,
    InboxMark,
    InboxRelease,
    LogEntry,
    OpenRequest,
    OpenResult,
    StoredRecord,
    TimerFailure,
    TransitionRecord,
)
from .timers import DueTimerScanner, ScanResult

if TYPE_CHECKING:
    from django_xsm.redis.memory import MemoryInbox, MemoryLog, MemoryStore

_IN_PROCESS = frozenset({"MemoryInbox", "MemoryLog", "MemoryStore"})

__all__ = [
    "DEFAULT_REDACT",
    "AdaptiveLock",
    "AsyncInboxStore",
    "AsyncStateStore",
    "AsyncTransitionLogStore",
    "AuditPlugin",
    "BlockOptions",
    "ClaimOutcome",
    "ClaimRequest",
    "ClaimStatus",
    "Codec",
    "CommitResult",
    "CommitUnit",
    "DueTimerScanner",
    "FernetCodec",
    "IdempotencyPlugin",
    "InboxMark",
    "InboxRelease",
    "InboxStore",
    "JsonCodec",
    "LogEntry",
    "MemoryInbox",
    "MemoryLog",
    "MemoryStore",
    "OpenRequest",
    "OpenResult",
    "OptimisticLock",
    "PersistedInstance",
    "PessimisticLock",
    "Plugin",
    "ReplayedReceipt",
    "ScanResult",
    "StateStore",
    "StoreLock",
    "StoredRecord",
    "TimerFailure",
    "TransitionLogStore",
    "TransitionRecord",
    "apersisted",
    "aretry_on_conflict",
    "persisted",
    "redact",
    "replay",
    "retry_on_conflict",
]


def __getattr__(name: str) -> Any:
    """``MemoryStore``, ``MemoryInbox``, ``MemoryLog``: the in-process
    stores (:mod:`django_xsm.redis.memory`), imported when first asked for,
    so this stdlib-only layer does not import Redis' unless they are used
    (the one import of a higher layer, allowed in pyproject.toml)."""
    if name in _IN_PROCESS:
        from django_xsm.redis import memory

        return getattr(memory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
