"""The ``Plugin`` base for custom hooks, and the event shapes plugins see."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django_xsm.engine import to_event
from django_xsm.exceptions import InvalidConfigError

from .audit import AuditPlugin
from .idempotency import IdempotencyPlugin

if TYPE_CHECKING:
    from .block import PersistedInstance
    from .records import CommitResult

__all__ = ["EventView", "Plugin", "normalize_event", "sort_plugins"]


class Plugin:
    """Base for custom plugins: synchronous hooks, no I/O expected.

    ``before_send`` may raise to refuse an event before it runs;
    ``after_send`` sees every receipt; ``after_commit`` runs once the
    block's changes are durable.
    """

    def before_send(
        self, block: PersistedInstance, event_type: str, payload: Mapping[str, Any]
    ) -> None:
        """Called before the engine sees the event."""

    def after_send(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        """Called after the engine processed the event."""

    def after_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        """Called after a successful commit."""


def sort_plugins(
    plugins: tuple[Any, ...],
) -> tuple[IdempotencyPlugin | None, AuditPlugin | None, list[Plugin]]:
    """``(idempotency, audit, hooks)``: at most one of the first two."""
    idempotency: IdempotencyPlugin | None = None
    audit: AuditPlugin | None = None
    hooks: list[Plugin] = []
    for plugin in plugins:
        if isinstance(plugin, IdempotencyPlugin):
            if idempotency is not None:
                raise InvalidConfigError("Only one IdempotencyPlugin per block", path="plugins")
            idempotency = plugin
        elif isinstance(plugin, AuditPlugin):
            if audit is not None:
                raise InvalidConfigError("Only one AuditPlugin per block", path="plugins")
            audit = plugin
        elif isinstance(plugin, Plugin):
            hooks.append(plugin)
        else:
            raise InvalidConfigError(
                f"{type(plugin).__name__} is not a plugin",
                path="plugins",
                hint="use IdempotencyPlugin, AuditPlugin or a Plugin subclass",
            )
    return idempotency, audit, hooks


def normalize_event(event: object, payload: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(type, payload)`` of a ``send()``: the engine's one contract
    (:func:`django_xsm.engine.to_event`: a non-empty string, a mapping with
    a string ``type``, or an ``Event``; ``InvalidEventError`` otherwise)."""
    normalized = to_event(event, payload)
    return normalized.type, normalized.data


class EventView:
    """What ``principal(event)`` receives: ``.type``, ``.data``, item access."""

    __slots__ = ("data", "type")

    def __init__(self, etype: str, data: dict[str, Any]) -> None:
        self.type = etype
        self.data = data

    def __getitem__(self, name: str) -> Any:
        return self.data[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.data.get(name, default)
