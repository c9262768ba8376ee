"""Pages of a row's transition log, newest first, for ``GET .../{pk}/history/``.

A page holds the records with a seq below its cursor (the first page: the
newest ones). Its ``next`` cursor is the seq the following page stays
below, so a client that follows ``next`` sees every record once, however
many are committed meanwhile (new records have higher seqs). Records are
read through the log's own readers (``read_last`` for the first page,
``read`` from the window's start for the others): no scan, at most two
round trips, and a log trimmed at its old end (``MAXLEN``,
``xsm_purge_logs``) ends the pages where its records end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django_xsm.persistence.records import TransitionRecord
from django_xsm.redis.log import MAX_SEQ

__all__ = ["HistoryPage", "parse_cursor", "parse_page_size", "read_page"]

_DIGITS = re.compile(r"[0-9]{1,19}")


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """Records newest first, and the cursor of the older page (None: none)."""

    records: list[TransitionRecord]
    next_cursor: int | None


def parse_cursor(text: str | None) -> int | None:
    """The ``?cursor=`` of a page: None for the first page, else the seq
    the page stays below (1 to ``MAX_SEQ + 1``); ``ValueError`` otherwise."""
    if text is None or text == "":
        return None
    if not _DIGITS.fullmatch(text) or not 1 <= int(text) <= MAX_SEQ + 1:
        raise ValueError(text)
    return int(text)


def parse_page_size(text: str | None, default: int, maximum: int) -> int:
    """The ``?page_size=``: ``default`` when absent, at most ``maximum``;
    ``ValueError`` for anything but a whole number from 1."""
    if text is None or text == "":
        return min(default, maximum)
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) < 1:
        raise ValueError(text)
    return min(int(text), maximum)


def read_page(log: Any, key: str, cursor: int | None, size: int) -> HistoryPage | None:
    """One page of ``key``'s log from ``log`` (a TransitionLogStore); None
    when ``cursor`` is past the log's newest record plus one, which no
    ``next`` link gives (following its pages would walk empty ones)."""
    if cursor is None:
        found = log.read_last(key, count=size)  # oldest first
        if len(found) < size:  # the whole log
            return HistoryPage(found[::-1], None)
        lowest = found[0].seq
        return HistoryPage(found[::-1], lowest if _older_than(log, key, lowest) else None)
    start = max(0, cursor - 1 - size)  # the page holds start < seq < cursor
    window = cursor - 1 - start
    found = log.read(key, after_seq=start, limit=window) if window > 0 else []
    records = [r for r in found if r.seq < cursor][::-1]
    if found and len(found) < window and cursor > found[-1].seq + 1:
        return None  # the read ran out: found[-1] is the newest record
    more = start > 0 and _older_than(log, key, start + 1)
    if window > 0 and not found and more:
        return None  # nothing after start, something at or below it
    return HistoryPage(records, start + 1 if more else None)


def _older_than(log: Any, key: str, seq: int) -> bool:
    """Whether the log still holds a record below ``seq``."""
    oldest = log.read(key, after_seq=0, limit=1)
    return bool(oldest) and oldest[0].seq < seq
