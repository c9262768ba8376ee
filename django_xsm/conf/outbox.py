"""``XSM['OUTBOX']``: the handler patterns and the delivery retry policy.

A pattern is an exact type (``"order.paid"``), a prefix wildcard by whole
tokens (``"order.*"``) or ``"*"`` (docs/outbox.md, Handlers and patterns).
Anything else is refused when the settings are read, because a pattern
that can never match would only show up later as dead letters. The
handlers' paths are imported by :mod:`django_xsm.outbox.handlers`
(``xsm.E014``: importing user code is not parsing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from django_xsm.brief import brief

from .parsing import Problems, fail, number
from .values import Outbox

__all__ = ["MAX_PATTERN", "backoff_fits", "outbox", "pattern_problem"]

#: The longest pattern accepted (event types are short words, not documents).
MAX_PATTERN = 200
_EXAMPLE = "e.g. {'order.paid': 'shop.effects.send_receipt', 'order.*': 'shop.effects.audit'}"


def pattern_problem(pattern: object) -> str | None:
    """Why ``pattern`` is not a handler pattern, or None when it is one."""
    if not isinstance(pattern, str) or not pattern:
        return f"a pattern is a non-empty string, got {brief(pattern)}"
    if len(pattern) > MAX_PATTERN:
        return f"a pattern is at most {MAX_PATTERN} characters"
    if pattern == "*":
        return None
    if any(c.isspace() or not c.isprintable() for c in pattern):
        return "a pattern has no spaces or control characters"
    stem = pattern[:-2] if pattern.endswith(".*") else pattern
    if "*" in stem:
        return (
            "'*' is allowed only as the last token: 'order.*' (order and order.<anything>) "
            "or '*' (every event)"
        )
    if stem.startswith(".") or stem.endswith(".") or ".." in stem:
        return "tokens are separated by single dots, e.g. 'order.paid'"
    return None


def _handlers(value: Any, p: Problems) -> dict[str, str]:
    """The valid entries of ``HANDLERS``; each bad one is recorded in ``p``
    (all of them, so one round of fixes is enough)."""
    parts = ("OUTBOX", "HANDLERS")
    if not isinstance(value, Mapping):
        raise fail(
            f"expected a dict of event-type pattern -> dotted path, got {type(value).__name__}",
            *parts,
            hint=_EXAMPLE,
        )
    found: dict[str, str] = {}
    for pattern, path in value.items():
        # a pattern is shown bounded, like an unknown key (check_keys)
        where = (*parts, pattern[:60] if isinstance(pattern, str) else brief(pattern))
        why = pattern_problem(pattern)
        if why is not None:
            p.report(why, *where)
        elif not isinstance(path, str) or not path.strip():
            p.report(
                f"expected the dotted path of a handler, got {brief(path)}",
                *where,
                hint="e.g. 'shop.effects.send_receipt', a function handler(event, *, delivery)",
            )
        else:
            found[pattern] = path
    return found


def backoff_fits(section: str, backoff_s: float, max_backoff_s: float) -> None:
    """The cap bounds the doubling waits, so it cannot be below the first
    one (``persistence.backoff.Backoff`` refuses it too, later and less
    clearly)."""
    if max_backoff_s < backoff_s:
        raise fail(
            f"{max_backoff_s:g} s is below BACKOFF_S ({backoff_s:g} s)",
            section,
            "MAX_BACKOFF_S",
            hint="the longest wait must be at least the first one; e.g. BACKOFF_S 1.0 and "
            "MAX_BACKOFF_S 300.0",
        )


def outbox(m: Mapping[str, Any], p: Problems) -> Outbox:
    """``XSM['OUTBOX']`` merged with its defaults, every problem recorded."""
    found = Outbox(
        handlers=p.take(_handlers, m["HANDLERS"], p, default={}),
        max_attempts=p.take(
            number, m["MAX_ATTEMPTS"], "OUTBOX", "MAX_ATTEMPTS", integer=True, minimum=1, default=1
        ),
        backoff_s=float(p.take(number, m["BACKOFF_S"], "OUTBOX", "BACKOFF_S", default=0)),
        # an unreadable cap takes no part in the check against BACKOFF_S below
        max_backoff_s=float(
            p.take(number, m["MAX_BACKOFF_S"], "OUTBOX", "MAX_BACKOFF_S", default=math.inf)
        ),
        visibility_timeout_s=float(
            p.take(
                number,
                m["VISIBILITY_TIMEOUT_S"],
                "OUTBOX",
                "VISIBILITY_TIMEOUT_S",
                minimum=0.01,
                maximum=7 * 86_400,
                hint="longer than your slowest handler: a lease held past it is "
                "handed to another worker",
                default=60,
            )
        ),
    )
    p.take(backoff_fits, "OUTBOX", found.backoff_s, found.max_backoff_s)
    return found
