"""Every Lua script of django-xsm, each a constant with its contract.

Rules every script follows:

* all checks come before the first write (Redis does not roll back a
  script that fails half way);
* one hash slot per call: every key shares the ``{prefix:bucket}`` tag;
* time is the server's (``TIME``), never the caller's, for expiry;
* index members are pruned through ``PRELUDE_INDEX`` so no index keeps a
  key whose snapshot is gone.

Scripts are called by SHA (EVALSHA); after ``SCRIPT FLUSH`` (NOSCRIPT) the
driver sends the source with EVAL, which runs and re-caches it in one step
(see :mod:`django_xsm.redis.client`). One module per area: ``records``,
``inbox``, ``indexes``, ``log``, ``outbox``, ``rewrite``; shared Lua helpers in ``preludes``.
"""

from __future__ import annotations

from .inbox import CLAIM, FORGET_SCOPE, MARK, PURGE_INBOX, RELEASE
from .indexes import DUE, LIST_PAGE, PARK, PRUNE_EXPIRED, RECORD_TIMER_FAILURE
from .log import LOG_APPEND, LOG_PURGE
from .outbox import (
    OUTBOX_ACK,
    OUTBOX_FAIL,
    OUTBOX_PENDING,
    OUTBOX_PROMOTE,
    OUTBOX_PURGE_DEAD,
    OUTBOX_READ,
    OUTBOX_RECLAIM,
    OUTBOX_REDRIVE,
    OUTBOX_REDRIVE_PAGE,
    OUTBOX_STATS,
)
from .preludes import COMMIT_HISTORY as COMMIT_HISTORY
from .records import (
    ACQUIRE_LOCK,
    COMMIT,
    DELETE,
    FORGET,
    OPEN,
    RELEASE_LOCK,
    SCHEMA,
    UPGRADE_LAYOUT,
)
from .rewrite import HASH_CAS, STREAM_REWRITE

#: The scripts (not the preludes): what the drivers load and call.
__all__ = [
    "ACQUIRE_LOCK",
    "CLAIM",
    "COMMIT",
    "DELETE",
    "DUE",
    "FORGET",
    "FORGET_SCOPE",
    "HASH_CAS",
    "LIST_PAGE",
    "LOG_APPEND",
    "LOG_PURGE",
    "MARK",
    "OPEN",
    "OUTBOX_ACK",
    "OUTBOX_FAIL",
    "OUTBOX_PENDING",
    "OUTBOX_PROMOTE",
    "OUTBOX_PURGE_DEAD",
    "OUTBOX_READ",
    "OUTBOX_RECLAIM",
    "OUTBOX_REDRIVE",
    "OUTBOX_REDRIVE_PAGE",
    "OUTBOX_STATS",
    "PARK",
    "PRUNE_EXPIRED",
    "PURGE_INBOX",
    "RECORD_TIMER_FAILURE",
    "RELEASE",
    "RELEASE_LOCK",
    "SCHEMA",
    "STREAM_REWRITE",
    "UPGRADE_LAYOUT",
]
