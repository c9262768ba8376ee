"""``transaction.on_commit`` inside a test's transaction, as in production.

Django's ``TestCase`` (and pytest-django's ``db``) runs each test inside a
transaction that is rolled back, never committed, so on-commit callbacks
never run: ``post_transition`` receivers stay silent and a new row's
statechart is never created. In production the same code runs outside
that transaction: a callback registered outside any ``atomic()`` block
runs at once, one registered inside runs when the outermost block the code
opened commits, and not at all when it rolls back.

:class:`CommitCallbacks` gives a test that behaviour on every database
connection of its thread: while it is active, a callback registered when
only the test's own transaction is open runs at once, and one registered
inside the code's own ``atomic()`` runs when that block commits (its
savepoint is released and no other block of the code is still open). A
block that rolls back drops its callbacks, as Django does. Callbacks that
were queued before it became active are left alone. It wraps two methods
of the connection objects (``on_commit``, ``savepoint_commit``) for the
length of the test and puts them back afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import connections

__all__ = ["CommitCallbacks"]

logger = logging.getLogger("django.db.backends.base")  # where Django logs robust failures


def _only_the_tests_transaction(connection: Any) -> bool:
    """True when atomic blocks are open and each was opened by the test
    case (``TestCase``, pytest-django's ``db``), none by the code."""
    blocks = connection.atomic_blocks
    return bool(blocks) and all(getattr(b, "_from_testcase", False) for b in blocks)


class _Connection:
    """The wrapped methods of one connection object, and the callbacks
    registered through them."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.mine: list[tuple[Any, ...]] = []  # entries of run_on_commit we added
        self.saved = {
            name: connection.__dict__.get(name) for name in ("on_commit", "savepoint_commit")
        }
        self.original_on_commit: Callable[..., None] = connection.on_commit
        self.original_savepoint_commit: Callable[[str], None] = connection.savepoint_commit
        connection.on_commit = self.on_commit
        connection.savepoint_commit = self.savepoint_commit

    def restore(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                self.connection.__dict__.pop(name, None)
            else:
                setattr(self.connection, name, value)

    def on_commit(self, func: Callable[[], Any], robust: bool = False) -> None:
        queue = self.connection.run_on_commit
        before = len(queue)
        self.original_on_commit(func, robust)
        if len(self.connection.run_on_commit) > before:  # queued: inside a transaction
            self.mine.append(self.connection.run_on_commit[-1])
            self.run_ready()

    def savepoint_commit(self, sid: str) -> None:
        self.original_savepoint_commit(sid)
        self.run_ready()

    def run_ready(self) -> None:
        """Once only the test's transaction is open, run (in order) the
        callbacks registered through this object that are still queued: the
        code's blocks they were registered in have committed (a block that
        rolled back took its callbacks off the queue)."""
        connection = self.connection
        while _only_the_tests_transaction(connection):
            queued = connection.run_on_commit
            self.mine = [e for e in self.mine if _is_in(e, queued)]
            entry = next((e for e in queued if _is_in(e, self.mine)), None)
            if entry is None:
                return
            connection.run_on_commit = [e for e in queued if e is not entry]
            self.mine = [e for e in self.mine if e is not entry]
            _run(entry)


def _is_in(entry: tuple[Any, ...], entries: list[tuple[Any, ...]]) -> bool:
    return any(e is entry for e in entries)


def _run(entry: tuple[Any, ...]) -> None:
    _sids, func, robust = entry
    if not robust:
        func()
        return
    try:
        func()
    except Exception as exc:  # as Django's own robust callbacks
        logger.error(
            "Error calling %s in on_commit() (%s).",
            getattr(func, "__qualname__", repr(func)),
            exc,
            exc_info=True,
        )


class CommitCallbacks:
    """On-commit callbacks as in production, for one test (see the module
    docstring): :meth:`start`, then :meth:`stop`."""

    def __init__(self) -> None:
        self._wrapped: list[_Connection] = []

    def start(self) -> None:
        self._wrapped = [_Connection(c) for c in connections.all()]

    def stop(self) -> None:
        wrapped, self._wrapped = self._wrapped, []
        for item in reversed(wrapped):
            item.restore()
