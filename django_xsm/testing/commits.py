"""``transaction.on_commit`` inside a test's transaction, as in production.

Django's ``TestCase`` (and pytest-django's ``db``) runs each test inside a
transaction that is rolled back, never committed, so on-commit callbacks
never run: ``post_transition`` receivers stay silent and a new row's
statechart is never created. In production the same code runs outside
that transaction: what it does outside any ``atomic()`` block commits as
it goes, and a block it opens commits when it exits (or rolls back, and
its callbacks never run).

:class:`CommitCallbacks` gives a test that behaviour on every database
connection of its thread: while it is active, a callback registered while
only the test's own transaction is open runs at once — or, registered
during a model's save or delete (a new row's statechart is created from
its ``pre_save``), once that save or delete is done, as its autocommit
would have committed it; a callback registered inside the code's own
``atomic()`` runs when that block commits (its savepoint is released and
no other block of the code is still open). A block that rolls back drops
its callbacks, as Django does. Callbacks queued before it became active
are left alone.

Its commit points are the registration, the release of a savepoint and
the end of a save or delete. Blocks opened with ``savepoint=False``
(``bulk_create()`` opens one) release no savepoint: their callbacks run at
the next commit point (wrap such code in
``captureOnCommitCallbacks(execute=True)`` to run them at once).

It wraps two methods of each connection object (``on_commit``,
``savepoint_commit``) and listens to the model signals for the length of
the test, and puts everything back afterwards.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save

__all__ = ["CommitCallbacks"]

logger = logging.getLogger("django.db.backends.base")  # where Django logs robust failures

_SIGNALS = ((pre_save, 1), (pre_delete, 1), (post_save, -1), (post_delete, -1))


def _only_the_tests_transaction(connection: Any) -> bool:
    """True when atomic blocks are open and each was opened by the test
    case (``TestCase``, pytest-django's ``db``), none by the code."""
    blocks = connection.atomic_blocks
    return bool(blocks) and all(getattr(b, "_from_testcase", False) for b in blocks)


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


class _Connection:
    """The wrapped methods of one connection object, and the callbacks
    registered through them."""

    def __init__(self, connection: Any, writes: threading.local) -> None:
        self.connection = connection
        self.writes = writes
        self.mine: list[tuple[Any, ...]] = []  # entries of run_on_commit we added
        names = ("on_commit", "savepoint_commit", "savepoint_rollback")
        self.saved = {name: connection.__dict__.get(name) for name in names}
        self.original_on_commit: Callable[..., None] = connection.on_commit
        self.original_savepoint_commit: Callable[[str], None] = connection.savepoint_commit
        self.original_savepoint_rollback: Callable[[str], None] = connection.savepoint_rollback
        connection.on_commit = self.on_commit
        connection.savepoint_commit = self.savepoint_commit
        connection.savepoint_rollback = self.savepoint_rollback

    def restore(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                self.connection.__dict__.pop(name, None)
            else:
                setattr(self.connection, name, value)

    def on_commit(self, func: Callable[[], Any], robust: bool = False) -> None:
        before = len(self.connection.run_on_commit)
        self.original_on_commit(func, robust)
        if len(self.connection.run_on_commit) > before:  # queued: inside a transaction
            self.mine.append(self.connection.run_on_commit[-1])
            if not getattr(self.writes, "depth", 0):
                self.run_ready()

    def savepoint_commit(self, sid: str) -> None:
        self.original_savepoint_commit(sid)
        self.run_ready()

    def savepoint_rollback(self, sid: str) -> None:
        self.original_savepoint_rollback(sid)
        self.writes.depth = 0  # a save that raised inside the block is over

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


class CommitCallbacks:
    """On-commit callbacks as in production, for one test (see the module
    docstring): :meth:`start`, then :meth:`stop`."""

    def __init__(self) -> None:
        self._wrapped: dict[str, _Connection] = {}
        self._writes = threading.local()  # .depth: saves and deletes under way
        self._receivers: list[tuple[Any, Callable[..., None]]] = []

    def start(self) -> None:
        self._writes.depth = 0
        self._wrapped = {c.alias: _Connection(c, self._writes) for c in connections.all()}
        for signal, step in _SIGNALS:
            receiver = self._counter(step)
            signal.connect(receiver, weak=False)
            self._receivers.append((signal, receiver))

    def _counter(self, step: int) -> Callable[..., None]:
        def receiver(sender: Any, *, using: str = "default", **kwargs: Any) -> None:
            depth = max(0, getattr(self._writes, "depth", 0) + step)
            self._writes.depth = depth
            wrapped = self._wrapped.get(using)
            if step < 0 and depth == 0 and wrapped is not None:
                wrapped.run_ready()  # the save or delete is done: its autocommit

        return receiver

    def stop(self) -> None:
        for signal, receiver in self._receivers:
            signal.disconnect(receiver)
        self._receivers = []
        wrapped, self._wrapped = self._wrapped, {}
        for item in reversed(list(wrapped.values())):
            item.restore()
