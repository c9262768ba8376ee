"""Durations as operators type them (docs/commands.md): one or more
``<digits><unit>`` parts, largest unit first, each unit at most once
(``30d``, ``1h30m``, ``2h30m15s``); units ``d``, ``h``, ``m``, ``s`` and,
where the caller allows them, ``ms``. Anything else is a ``ValueError``
naming the accepted forms; so are zero and anything above ``maximum``.

::

    parse_duration("1h30m")                  # timedelta(hours=1, minutes=30)
    format_duration(5_400_000)               # "1h30m"
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = ["MAX_DURATION", "format_duration", "parse_duration"]

_UNITS: dict[str, int] = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
_ORDER = ("d", "h", "m", "s", "ms")
# "ms" before "m" and "s": the regex takes the longest unit at each position.
_PART = re.compile(r"(\d{1,15})(ms|d|h|m|s)")

#: The default ceiling: 100 years.
MAX_DURATION = _dt.timedelta(days=36_500)


def _forms(allow_ms: bool) -> str:
    extra = ", 500ms" if allow_ms else ""
    return f"a whole number with a unit: 30d, 12h, 15m, 90s{extra}, or combined like 1h30m"


def parse_duration(
    text: str,
    *,
    name: str = "duration",
    allow_ms: bool = False,
    maximum: _dt.timedelta = MAX_DURATION,
) -> _dt.timedelta:
    """``text`` as a positive timedelta; ``ValueError`` naming ``name`` and
    the accepted forms otherwise."""
    raw = text if isinstance(text, str) else ""
    value = raw.strip().lower()
    invalid = f"Invalid {name} {text!r}: use {_forms(allow_ms)}"
    if not value:
        raise ValueError(invalid)
    if value.startswith("-"):
        raise ValueError(f"Invalid {name} {text!r}: durations are positive; use {_forms(allow_ms)}")
    total_ms, pos, last = 0, 0, -1
    for match in _PART.finditer(value):
        if match.start() != pos:
            raise ValueError(invalid)
        unit = match.group(2)
        if unit == "ms" and not allow_ms:
            raise ValueError(f"Invalid {name} {text!r}: milliseconds are not accepted here")
        rank = _ORDER.index(unit)
        if rank <= last:
            raise ValueError(
                f"Invalid {name} {text!r}: give each unit once, largest first (e.g. 1d12h, 1h30m)"
            )
        last = rank
        total_ms += int(match.group(1)) * _UNITS[unit]
        pos = match.end()
    if pos != len(value) or last < 0:
        raise ValueError(invalid)
    if total_ms == 0:
        raise ValueError(f"Invalid {name} {text!r}: must be more than zero")
    limit_ms = int(maximum.total_seconds() * 1000)
    if total_ms > limit_ms:
        raise ValueError(
            f"Invalid {name} {text!r}: at most {format_duration(limit_ms)} is accepted"
        )
    return _dt.timedelta(milliseconds=total_ms)


def format_duration(ms: int | float) -> str:
    """Milliseconds in the same notation (``1h30m``, ``250ms``, ``0s``);
    negative values keep their sign."""
    value = round(ms)
    if value < 0:
        return "-" + format_duration(-value)
    if value == 0:
        return "0s"
    parts = []
    for unit in _ORDER:
        count, value = divmod(value, _UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
