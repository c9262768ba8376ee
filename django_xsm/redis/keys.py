"""The whole Redis key layout of a namespace, in one place.

Every key of an instance lives under the hash tag of its bucket,
``{<prefix>:<bucket>}``, so each script touches one Redis Cluster slot; the
table of keys, their types and what they hold is docs/redis.md (Key
layout). An idempotency row lives in the bucket of the instance it was
used with. The bucket of a key is ``crc32(utf-8 key) % buckets``; the
bucket count is fixed when the namespace is created and read back from the
schema marker.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from django_xsm.exceptions import InvalidConfigError
from django_xsm.persistence.arguments import validate_prefix

__all__ = [
    "DEFAULT_BUCKETS",
    "LAYOUT_VERSION",
    "LOCK_WAKE_MS",
    "LONG_PART",
    "LONG_PARTS",
    "MAX_BUCKETS",
    "SEP",
    "KeyLayout",
    "escape_glob",
]

#: Version of this layout; a namespace marked with another one is refused
#: (an older one names the upgrade: :func:`django_xsm.redis.upgrade_layout`).
#: 2: long snapshot-hash values in parts, floors only under ``ttl_s``, the
#: root state left out of the state index (docs/redis.md, "Layout versions").
LAYOUT_VERSION = 2
#: Long values of the snapshot hash (``d``, ``cid``) longer than LONG_PART
#: bytes (Redis' default ``hash-max-listpack-value``) and at most
#: LONG_PART * LONG_PARTS are stored in parts ``<f>1..<f>n``, count ``<f>n``.
LONG_PART = 64
LONG_PARTS = 24
#: Lifetime (ms) of a lock's waiters flag and of its wake-up: waiters block
#: for at most 250 ms at a time and flag again on every try, so both outlive
#: any live waiter's gap between tries.
LOCK_WAKE_MS = 2000
DEFAULT_BUCKETS = 16
MAX_BUCKETS = 1024
#: Separator inside index members; keys and scopes never contain it.
SEP = "\x00"

_GLOB_SPECIAL = frozenset("*?[]\\")


def escape_glob(text: str) -> str:
    """``text`` with Redis glob metacharacters (``* ? [ ] \\``) escaped, so a
    ``SCAN MATCH escape_glob(prefix) + "*"`` matches the prefix literally."""
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in text)


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """Key names for one namespace (``prefix``) with ``buckets`` buckets."""

    prefix: str
    buckets: int = DEFAULT_BUCKETS

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        if (
            isinstance(self.buckets, bool)
            or not isinstance(self.buckets, int)
            or not 1 <= self.buckets <= MAX_BUCKETS
        ):
            raise InvalidConfigError(
                f"buckets must be an int from 1 to {MAX_BUCKETS}, got {self.buckets!r}",
                path="buckets",
            )

    @staticmethod
    def schema_key_for(prefix: str) -> str:
        return f"{{{validate_prefix(prefix)}}}:schema"

    @property
    def schema(self) -> str:
        return self.schema_key_for(self.prefix)

    @staticmethod
    def health_key_for(prefix: str) -> str:
        """Written (with a 10 s expiry) by ``health()`` to prove writability."""
        return f"{{{validate_prefix(prefix)}}}:health"

    @property
    def health(self) -> str:
        return self.health_key_for(self.prefix)

    def bucket_health(self, bucket: int) -> str:
        """The per-bucket twin of :attr:`health` (same 10 s expiry)."""
        return f"{self.tag(bucket)}:health"

    def bucket(self, key: str) -> int:
        return zlib.crc32(key.encode()) % self.buckets

    def tag(self, bucket: int) -> str:
        return f"{{{self.prefix}:{bucket}}}"

    def tag_of(self, key: str) -> str:
        return self.tag(self.bucket(key))

    # --- per instance --------------------------------------------------------

    def snapshot(self, key: str) -> str:
        return f"{self.tag_of(key)}:s:{key}"

    def snapshot_prefix(self, bucket: int) -> str:
        """``snapshot(key) == snapshot_prefix(bucket(key)) + key``."""
        return f"{self.tag(bucket)}:s:"

    def log_prefix(self, bucket: int) -> str:
        """``log(key) == log_prefix(bucket(key)) + key``."""
        return f"{self.tag(bucket)}:log:"

    def lock(self, key: str) -> str:
        return f"{self.tag_of(key)}:l:{key}"

    def lock_waiters(self, key: str) -> str:
        """Flag: a busy open or acquire saw the lock held and waits."""
        return f"{self.tag_of(key)}:lq:{key}"

    def lock_wake(self, key: str) -> str:
        """List a release pushes to (when waiters are flagged); waiters BLPOP it."""
        return f"{self.tag_of(key)}:lw:{key}"

    def lock_keys(self, key: str) -> list[str]:
        """The lock, its waiters flag and its wake list, in script KEYS order."""
        return [self.lock(key), self.lock_waiters(key), self.lock_wake(key)]

    def log(self, key: str) -> str:
        return f"{self.tag_of(key)}:log:{key}"

    def inbox(self, scope: str, instance_key: str) -> str:
        return f"{self.tag_of(instance_key)}:in:{scope}"

    def inbox_for_bucket(self, scope: str, bucket: int) -> str:
        return f"{self.tag(bucket)}:in:{scope}"

    @staticmethod
    def inbox_field(instance_key: str, idempotency_key: str) -> str:
        return f"{instance_key}{SEP}{idempotency_key}"

    # --- per bucket ------------------------------------------------------------

    def floors(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:ver"

    def index_info(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:ix"

    def keys_index(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:idx"

    def machine_index(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:midx"

    def state_index(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:sidx"

    def due(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:due"

    def dead(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:dead"

    def expiry(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:exp"

    def log_index(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:lidx"

    def inbox_expiry(self, bucket: int) -> str:
        return f"{self.tag(bucket)}:inx"

    # --- the outbox (docs/outbox.md) -------------------------------------------

    def outbox(self, bucket: int) -> str:
        """Stream of emitted events waiting for delivery (COMMIT appends)."""
        return f"{self.tag(bucket)}:ob"

    def outbox_retry(self, bucket: int) -> str:
        """Zset: delivery id -> when its next attempt is due (ms)."""
        return f"{self.tag(bucket)}:obr"

    def outbox_waiting(self, bucket: int) -> str:
        """Hash: delivery id -> the entry waiting for its retry (JSON)."""
        return f"{self.tag(bucket)}:obw"

    def outbox_dead(self, bucket: int) -> str:
        """Stream of dead letters: entries that ran out of attempts."""
        return f"{self.tag(bucket)}:obd"

    def index_keys(self, bucket: int) -> list[str]:
        """The per-bucket keys the PRUNE prelude needs, in its KEYS order."""
        return [
            self.index_info(bucket),
            self.keys_index(bucket),
            self.machine_index(bucket),
            self.state_index(bucket),
            self.due(bucket),
            self.dead(bucket),
            self.expiry(bucket),
        ]

    def prune_keys(self, bucket: int) -> list[str]:
        """KEYS of the scripts that prune dead keys (DUE, LIST_PAGE,
        PRUNE_EXPIRED): the index keys, then the log index."""
        return [*self.index_keys(bucket), self.log_index(bucket)]
