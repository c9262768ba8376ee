"""Durations: the accepted forms and clear errors for everything else."""

from __future__ import annotations

import datetime as dt

import pytest

from django_xsm.management.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", dt.timedelta(days=30)),
        ("12h", dt.timedelta(hours=12)),
        ("15m", dt.timedelta(minutes=15)),
        ("90s", dt.timedelta(seconds=90)),
        ("1h30m", dt.timedelta(hours=1, minutes=30)),
        ("1d12h", dt.timedelta(days=1, hours=12)),
        ("2h0m5s", dt.timedelta(hours=2, seconds=5)),
        (" 7D ", dt.timedelta(days=7)),
        ("36500d", dt.timedelta(days=36_500)),
    ],
)
def test_accepted_forms(text: str, expected: dt.timedelta):
    assert parse_duration(text) == expected


def test_milliseconds_only_where_allowed():
    assert parse_duration("500ms", allow_ms=True) == dt.timedelta(milliseconds=500)
    assert parse_duration("1s500ms", allow_ms=True) == dt.timedelta(seconds=1.5)
    with pytest.raises(ValueError, match="milliseconds are not accepted here"):
        parse_duration("500ms")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "use a whole number with a unit: 30d, 12h, 15m, 90s"),
        ("30", "use a whole number with a unit"),
        ("30x", "use a whole number with a unit"),
        ("d", "use a whole number with a unit"),
        ("1.5h", "use a whole number with a unit"),
        ("1 h", "use a whole number with a unit"),
        ("30 days", "use a whole number with a unit"),
        ("+5d", "use a whole number with a unit"),
        ("-5d", "durations are positive"),
        ("0s", "must be more than zero"),
        ("0d0h", "must be more than zero"),
        ("30m1h", "largest first"),
        ("1h1h", "largest first"),
        ("36501d", "at most 36500d"),
        ("99999999999999d", "at most 36500d"),
        ("1" * 40 + "d", "use a whole number with a unit"),
    ],
)
def test_rejected_forms_name_the_accepted_ones(text: str, fragment: str):
    with pytest.raises(ValueError, match="Invalid --older-than") as info:
        parse_duration(text, name="--older-than")
    assert fragment in str(info.value)


def test_custom_maximum():
    with pytest.raises(ValueError, match="at most 1h"):
        parse_duration("2h", maximum=dt.timedelta(hours=1))


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0s"), (250, "250ms"), (90_000, "1m30s"), (5_400_000, "1h30m"), (-1500, "-1s500ms")],
)
def test_format(ms: int, text: str):
    assert format_duration(ms) == text
