"""Redis backends: one-script commits, fencing locks, an idempotency inbox,
transition logs on Streams and a durable deadline index.

``MemoryStore``, ``MemoryInbox`` and ``MemoryLog`` are the same backends
on an in-process fakeredis (:mod:`django_xsm.redis.memory`). Imports
redis-py only (no Django). See :mod:`django_xsm.redis.keys` for the
key layout and :mod:`django_xsm.redis.scripts` for the Lua scripts.
"""

from __future__ import annotations

from .async_store import AsyncRedisStore
from .client import is_cluster
from .inbox import AsyncRedisInbox, RedisInbox
from .keys import DEFAULT_BUCKETS, LAYOUT_VERSION, KeyLayout, escape_glob
from .log import AsyncRedisLog, RedisLog
from .memory import MemoryInbox, MemoryLog, MemoryStore
from .outbox import DeadLetter, OutboxLease, RedisOutbox
from .reencrypt import Reencryptor, ReencryptStep
from .store import RedisStore

__all__ = [
    "DEFAULT_BUCKETS",
    "LAYOUT_VERSION",
    "AsyncRedisInbox",
    "AsyncRedisLog",
    "AsyncRedisStore",
    "DeadLetter",
    "KeyLayout",
    "MemoryInbox",
    "MemoryLog",
    "MemoryStore",
    "OutboxLease",
    "RedisInbox",
    "RedisLog",
    "RedisOutbox",
    "RedisStore",
    "ReencryptStep",
    "Reencryptor",
    "escape_glob",
    "is_cluster",
]
