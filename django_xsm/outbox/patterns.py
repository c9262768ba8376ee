"""Which handler pattern an event type goes to: the most specific one, in
an order that does not depend on how the settings dict was written: the
exact type, then prefix wildcards by length (``"order.paid.*"`` before
``"order.*"``), then ``"*"``. A prefix wildcard matches by whole tokens:
``"order.*"`` matches ``order`` and ``order.paid.late``, not ``orders``;
two different prefixes that match one type never tie (their lengths differ).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["matches", "most_specific", "specificity"]


def matches(pattern: str, event_type: str) -> bool:
    """True when ``pattern`` (already valid, see ``conf.outbox``) takes
    ``event_type``."""
    if pattern == "*":
        return True
    if pattern.endswith(".*"):
        stem = pattern[:-2]
        return event_type == stem or event_type.startswith(stem + ".")
    return event_type == pattern


def specificity(pattern: str) -> tuple[int, int]:
    """Sort key, higher first: exact types, then prefixes by length, then ``*``."""
    if pattern == "*":
        return (0, 0)
    if pattern.endswith(".*"):
        return (1, len(pattern))
    return (2, len(pattern))


def most_specific(patterns: Iterable[str], event_type: str) -> str | None:
    """The pattern that takes ``event_type``, or None when none matches."""
    found = [p for p in patterns if matches(p, event_type)]
    return max(found, key=specificity) if found else None
