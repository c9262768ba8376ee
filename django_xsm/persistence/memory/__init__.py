"""In-process reference backends: MemoryStore, MemoryInbox, MemoryLog.

Thread-safe and faithful to the contract in :mod:`django_xsm.persistence.base`
(the same contract tests run against them and against Redis), so they
double as fakes in users' own tests. Nothing survives the process.

- :mod:`.store`: :class:`MemoryStore` (records, locks, deadline index);
- :mod:`.inbox`: :class:`MemoryInbox` (idempotency rows);
- :mod:`.log`: :class:`MemoryLog` (transition logs);
- :mod:`.rows`: the record rows the store keeps.
"""

from __future__ import annotations

from .inbox import MemoryInbox
from .log import MemoryLog
from .store import MemoryStore

__all__ = ["MemoryInbox", "MemoryLog", "MemoryStore"]
