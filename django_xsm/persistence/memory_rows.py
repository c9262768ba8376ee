"""The record rows of MemoryStore and the commit-id history they keep."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django_xsm.exceptions import InvalidConfigError

from .records import TimerFailure

__all__ = ["COMMIT_HISTORY", "Row", "check_commit_id"]

#: Recent commit ids a record remembers, so a client retry is recognised
#: even after other writers committed on top of it (as Redis does).
COMMIT_HISTORY = 8
_COMMIT_ID = re.compile(r"[\x21-\x7e]{1,128}")


@dataclass(slots=True)
class Row:
    data: bytes
    version: int
    machine_id: str
    machine_version: str
    updated_ms: int
    commits: tuple[tuple[str, int], ...]  # (commit id, version made), newest first
    state_ids: tuple[str, ...] = ()
    expires_ms: int | None = None
    failures: dict[str, TimerFailure] = field(default_factory=dict)

    def applied(self, commit_id: str) -> int | None:
        return next((v for cid, v in self.commits if cid == commit_id), None)

    def remember(self, commit_id: str, version: int) -> tuple[tuple[str, int], ...]:
        return ((commit_id, version), *self.commits)[:COMMIT_HISTORY]


def check_commit_id(commit_id: object) -> None:
    """1-128 printable ASCII characters without spaces (as RedisStore)."""
    # The id is how a retried commit is recognised: an empty one would make
    # every id-less commit a "replay" of the previous one.
    if not isinstance(commit_id, str) or not _COMMIT_ID.fullmatch(commit_id):
        raise InvalidConfigError(
            f"commit_id must be 1-128 printable ASCII characters without spaces, got {commit_id!r}",
            path="commit_id",
            hint="use secrets.token_hex(12)",
        )
