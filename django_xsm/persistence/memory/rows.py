"""The record rows of MemoryStore and the commit-id history they keep."""

from __future__ import annotations

from dataclasses import dataclass, field

from django_xsm.persistence.records import COMMIT_HISTORY, TimerFailure

__all__ = ["Row"]


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
