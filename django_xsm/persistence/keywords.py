"""``StoreKeywords``: the keyword signatures and argument checks of three
``StateStore`` methods, written once for every backend (the contract
itself is in :mod:`.base`)."""

from __future__ import annotations

import datetime as _dt
from typing import Generic, TypeVar

from . import records
from .base import check_listing, validate_limit, validate_text, wall_to_ms

__all__ = ["StoreKeywords"]

PageT = TypeVar("PageT")
DueT = TypeVar("DueT")
FlagT = TypeVar("FlagT")


class StoreKeywords(Generic[PageT, DueT, FlagT]):
    """The keyword signatures of ``StateStore.list_page``, ``due_keys`` and
    ``record_timer_failure``, spelled and checked once for every backend.

    A backend subclasses this and implements :meth:`_list_page`,
    :meth:`_due_keys` and :meth:`_record_timer_failure` with positional,
    already checked arguments. ``PageT``, ``DueT`` and ``FlagT`` are what
    those return: ``tuple[list[str], str]``, ``list[tuple[str, int]]`` and
    ``bool`` for a synchronous store, awaitables of them for an asyncio one
    (whose callers then ``await store.list_page(...)`` as usual).
    """

    __slots__ = ()

    def list_page(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int = 50,
        machine: str | None = None,
        state: str | None = None,
    ) -> PageT:
        """See ``StateStore.list_page``; the arguments are checked here."""
        check_listing(prefix, after, limit, machine, state)
        return self._list_page(prefix, after, limit, machine, state)

    def due_keys(
        self, until_wall: float | _dt.datetime, *, limit: int = 100, prefix: str = ""
    ) -> DueT:
        """See ``StateStore.due_keys``; ``prefix`` keeps keys starting with it
        (literally)."""
        until_ms = wall_to_ms(until_wall)
        validate_limit(limit)
        validate_text(prefix, "prefix")
        return self._due_keys(until_ms, limit, prefix)

    def record_timer_failure(
        self,
        key: str,
        *,
        expected_version: int,
        failures: records.TimerFailures,
        next_due_ms: int | None,
    ) -> FlagT:
        """See ``StateStore.record_timer_failure``."""
        return self._record_timer_failure(key, expected_version, failures, next_due_ms)

    def _list_page(
        self, prefix: str, after: str, limit: int, machine: str | None, state: str | None
    ) -> PageT:
        raise NotImplementedError

    def _due_keys(self, until_ms: int, limit: int, prefix: str) -> DueT:
        raise NotImplementedError

    def _record_timer_failure(
        self, key: str, expected: int, failures: records.TimerFailures, due_ms: int | None
    ) -> FlagT:
        raise NotImplementedError
