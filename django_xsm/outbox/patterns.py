"""Which handler pattern an event type goes to: the most specific one.

Every emitted event goes to exactly one handler, so overlapping patterns
need an order that does not depend on how the settings dict was written:

1. the exact type (``"order.paid"``);
2. prefix wildcards, the longest prefix first (``"order.paid.*"`` before
   ``"order.*"``);
3. ``"*"``.

A prefix wildcard matches by whole tokens, like the engine's event
descriptors: ``"order.*"`` matches ``order`` and ``order.paid.late``, not
``orders``. Two patterns can never tie: two different prefixes that both
match one type have different lengths.
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
