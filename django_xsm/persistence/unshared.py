"""The writes of a commit whose inbox or log does not share the store's
atomic step, in the documented order (see ``StateStore.commit``): the
snapshot first (the store's own step), then the inbox marks and releases,
then the log records. Written once for every store, as a generator of
:class:`~django_xsm.persistence.runner.Apply` requests, so blocking and
asyncio stores run the same steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from typing import Any

from django_xsm.exceptions import PartialCommitError

from .records import CommitUnit
from .runner import Apply

__all__ = ["after_save", "unshared_writes"]


@contextlib.contextmanager
def after_save(key: str, version: int, part: str) -> Iterator[None]:
    """Wrap the writes a store makes after the snapshot landed (marks or log
    records bound for an unshared inbox or log): a failure there is a
    :class:`PartialCommitError`, so the caller knows the change is durable
    and does not release its claims as if nothing happened."""
    try:
        yield
    except Exception as exc:
        raise PartialCommitError(key, version=version, part=part, cause=type(exc).__name__) from exc


def unshared_writes(
    unit: CommitUnit, version: int, *, inbox: Any, log: Any
) -> Generator[Apply, Any, int]:
    """Apply ``unit``'s marks and releases to ``inbox`` and its log entries
    to ``log`` (each None when it shares the commit or is absent), after the
    snapshot landed at ``version``. Returns the first log seq (0: none)."""
    if inbox is not None:
        with after_save(unit.key, version, "inbox"):
            for mark in unit.marks:
                yield Apply(inbox.mark, (mark,))
            for release in unit.releases:
                yield Apply(inbox.release, (release,))
    first_seq = 0
    if log is not None:
        with after_save(unit.key, version, "log"):
            for entry in unit.log_entries:
                seq = yield Apply(log.append_next, (unit.key, entry), {"version": version})
                first_seq = first_seq or int(seq)
    return first_seq
