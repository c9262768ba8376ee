"""What a worker did: counters per outcome, for summaries and exit codes."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["LoopResult", "WorkResult"]


@dataclass(slots=True)
class WorkResult:
    """Counters of one batch, or of many merged.

    ``taken``: leases handed to this worker; ``delivered``: handlers that
    returned (acknowledged); ``retried``: failures scheduled for another
    attempt; ``dead_lettered``: entries moved to the dead letters;
    ``lost``: leases reclaimed by another worker before this one finished
    (its ack or fail was refused); ``skipped``: leases left untouched
    because the batch ran too close to the visibility timeout;
    ``compensated`` / ``refused`` / ``deferred``: what became of the
    ``xsm.outbox.failed`` events; ``unavailable``: batches Redis could not
    serve. ``failed`` lists the delivery ids that failed in this run, each
    once however often it failed.
    """

    taken: int = 0
    delivered: int = 0
    retried: int = 0
    dead_lettered: int = 0
    lost: int = 0
    skipped: int = 0
    compensated: int = 0
    refused: int = 0
    deferred: int = 0
    unavailable: int = 0
    failed: list[str] = field(default_factory=list)

    def note_failure(self, delivery_id: str) -> None:
        if delivery_id not in self.failed:
            self.failed.append(delivery_id)

    def merge(self, other: WorkResult) -> None:
        for f in fields(self):
            if f.name == "failed":
                for delivery_id in other.failed:
                    self.note_failure(delivery_id)
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        """The counters, in a stable order (``failed`` left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "failed"}

    @property
    def errors(self) -> int:
        """Deliveries that failed (retried or dead-lettered)."""
        return len(self.failed)


@dataclass(frozen=True, slots=True)
class LoopResult:
    """Totals of a daemon run over ``batches`` takes."""

    total: WorkResult
    batches: int
