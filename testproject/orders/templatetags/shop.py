"""Template filters of the demo: money and times shown like people read them."""

from __future__ import annotations

import datetime as _dt

from django import template

register = template.Library()


@register.filter
def money(cents: object) -> str:
    """``3499`` -> ``"$34.99"`` (the demo's prices are integer cents)."""
    try:
        value = int(str(cents))
    except ValueError:
        return ""
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value) // 100:,}.{abs(value) % 100:02d}"


@register.filter
def utc(moment: object) -> str:
    """An aware datetime or an ISO string as ``2026-12-01 14:05:09 UTC``."""
    if isinstance(moment, str):
        try:
            moment = _dt.datetime.fromisoformat(moment)
        except ValueError:
            return moment
    if not isinstance(moment, _dt.datetime):
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(_dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
