"""The I/O requests a persisted block yields, and what runs them.

The block's logic (:mod:`.instance`) is written once as generators that
yield these requests; a :class:`BlockIO` executes them on the store, the
inbox and the log, blocking (``persisted()``) or with asyncio
(``apersisted()``), and sends back the reply.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

from django_xsm.persistence.records import ClaimRequest, CommitUnit, InboxRelease, OpenRequest

__all__ = [
    "BlockIO",
    "BlockOp",
    "Claim",
    "Commit",
    "Open",
    "Release",
    "ReleaseLock",
    "WaitUnlocked",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Open:
    """``store.open(request, inbox=...)``: lock, claims and load in one step."""

    request: OpenRequest


@dataclass(frozen=True, slots=True)
class Claim:
    """``inbox.claim(request)``: one round trip of its own."""

    request: ClaimRequest


@dataclass(frozen=True, slots=True)
class Commit:
    """``store.commit(unit, inbox=..., log=...)``."""

    unit: CommitUnit


@dataclass(frozen=True, slots=True)
class Release:
    """``inbox.release(release)``."""

    release: InboxRelease


@dataclass(frozen=True, slots=True)
class ReleaseLock:
    """``store.release_lock(key, token)``."""

    key: str
    token: str


@dataclass(frozen=True, slots=True)
class WaitUnlocked:
    """Wait for ``key``'s busy lock to be released, at most ``seconds``,
    before opening again: ``store.wait_unlocked(key, seconds)``, woken by
    the release (the queueing lock)."""

    key: str
    seconds: float


Request: TypeAlias = Open | Claim | Commit | Release | ReleaseLock | WaitUnlocked
BlockOp: TypeAlias = Generator[Request, Any, T]


class BlockIO(Protocol):
    """Runs block generators on one set of backends (sync or asyncio).

    ``run`` is what a plain ``send()`` uses: an asyncio runner refuses a
    generator that needs I/O there (it cannot block the event loop);
    ``arun`` is what ``await asend()`` uses.
    """

    is_async: bool

    def run(self, op: BlockOp[T]) -> T: ...

    async def arun(self, op: BlockOp[T]) -> T: ...
