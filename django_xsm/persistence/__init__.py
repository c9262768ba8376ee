"""Durable, concurrent-safe state for engine instances (stdlib only).

``persisted()`` / ``apersisted()`` wrap one instance in a load → send →
commit block; stores, inboxes and logs implement the protocols in
:mod:`django_xsm.persistence.base`; the in-memory backends here are the
reference implementations. Redis backends live in :mod:`django_xsm.redis`.
"""

from __future__ import annotations

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
    OptimisticLock,
    PessimisticLock,
    StoreLock,
    aretry_on_conflict,
    retry_on_conflict,
)
from .memory import MemoryInbox, MemoryLog, MemoryStore
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

__all__ = [
    "DEFAULT_REDACT",
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
