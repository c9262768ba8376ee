"""Read access to a block's live instance (the part of
:class:`~django_xsm.persistence.block.PersistedInstance` that never writes)."""

from __future__ import annotations

from typing import Any

from django_xsm.persistence.records import StoredRecord

__all__ = ["InstanceReads"]


class InstanceReads:
    """``value``, ``state_ids``, ``context``, ``status``, ``deadlines``,
    ``matches()``, ``can()`` and ``snapshot()`` of the engine instance.
    ``context`` is the live dict: changing it in the body is saved."""

    instance: Any
    record: StoredRecord | None

    @property
    def value(self) -> Any:
        return self.instance.value

    @property
    def state_ids(self) -> Any:
        return self.instance.state_ids

    @property
    def context(self) -> Any:
        return self.instance.context

    @property
    def status(self) -> str:
        return str(self.instance.status)

    @property
    def deadlines(self) -> Any:
        return self.instance.deadlines

    @property
    def created(self) -> bool:
        """True when this block started a new instance."""
        return self.record is None

    def matches(self, state_id: str) -> bool:
        return bool(self.instance.matches(state_id))

    def can(self, event: Any) -> bool:
        return bool(self.instance.can(event))

    def snapshot(self) -> dict[str, Any]:
        return dict(self.instance.snapshot())
