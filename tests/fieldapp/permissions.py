"""Object-level checks of the ``PERMISSIONS`` tests: ``fn(user, target,
event_type) -> bool``, target an ``Order`` row or an instance key."""

from __future__ import annotations

from typing import Any

#: Every call of :func:`small_orders`: (username, target, event_type).
CALLS: list[tuple[str, Any, str | None]] = []


def small_orders(user: Any, target: Any, event_type: str | None) -> bool:
    """A row: its total is under 100 (or the user is "boss"); a key: it
    does not end in "-locked"."""
    CALLS.append((user.username, target, event_type))
    if isinstance(target, str):
        return not target.endswith("-locked")
    return bool(target.total < 100 or user.username == "boss")


def broken(user: Any, target: Any, event_type: str | None) -> bool:
    raise RuntimeError("the check's own secret detail")


NOT_CALLABLE = 42
