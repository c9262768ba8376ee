"""The storage contract, written once.

Every backend (``RedisStore`` in ``django_xsm.redis``, and ``MemoryStore``:
the same on an in-process fakeredis) implements these protocols and passes
the same contract test class (the outbox's read side is the
``OutboxReader`` protocol of :mod:`django_xsm.persistence.outbox`). The
docstrings below are the guarantees callers may rely on; backends document
only what they add.

Vocabulary: a *key* names one instance (``"order:42"``); a *record* is what
is stored for it (snapshot + version + metadata); a *commit* applies one
block's :class:`~django_xsm.persistence.records.CommitUnit`.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from django_xsm.exceptions import InvalidConfigError

from . import records
from .outbox import OutboxReader

__all__ = [
    "AsyncInboxStore",
    "AsyncOpDriver",
    "AsyncStateStore",
    "AsyncTransitionLogStore",
    "Codec",
    "InboxOps",
    "InboxStore",
    "OpDriver",
    "StateStore",
    "StoreOp",
    "StoreOps",
    "TransitionLogStore",
    "iter_pages",
    "require_shared_commit",
    "retry_after_seconds",
    "system_clock_ms",
]

T = TypeVar("T")

#: One store operation written once, with no I/O: a generator that yields
#: the store's own requests (for Redis: script calls, commands, pipelines),
#: receives each reply and returns its result. The store's ``driver`` runs
#: it; a request that fails is thrown back in at the ``yield`` that asked.
StoreOp: TypeAlias = Generator[Any, Any, T]


def iter_pages(
    list_page: Callable[..., tuple[list[str], str]], prefix: str, machine: str | None
) -> Iterator[str]:
    """Every key ``list_page`` yields for ``prefix`` (and ``machine``),
    following its cursor 500 keys at a time: ``StateStore.list_keys``."""
    after = ""
    while True:
        page, after = list_page(prefix, after=after, limit=500, machine=machine)
        yield from page
        if not after:
            return


def system_clock_ms() -> int:
    """The wall clock in epoch milliseconds: the default clock of stores,
    blocks and scanners (the engine never reads a clock itself)."""
    return time.time_ns() // 1_000_000


def retry_after_seconds(ms: int) -> int:
    """A ``Retry-After`` in whole seconds for a wait of ``ms`` (at least 1)."""
    return max(1, -(-int(ms) // 1000))


def require_shared_commit(store: Any, *, inbox: object = None, log: object = None) -> None:
    """The one commit rule: a block's inbox and log commit in the store's
    own atomic step, so a commit lands whole or not at all. One given
    (None: the store's own) must be of the kind of the store's own part
    (``store.inbox``, ``store.log``) and one the store
    :meth:`~StateStore.shares_commit` with. Anything else is an
    ``InvalidConfigError``, raised before any I/O: there is no commit that
    writes them one after another."""
    if inbox is not None:
        _require_part(store, "inbox", inbox, store.inbox)
    if log is not None:
        _require_part(store, "log", log, store.log)


def _require_part(store: Any, what: str, given: object, own: object) -> None:
    kind = type(own).__name__
    if not isinstance(given, type(own)):
        problem = f"is not the store's kind of {what} ({kind})"
    elif not store.shares_commit(given):
        problem = f"is on another Redis, prefix or client kind than the store ({store!r})"
    else:
        return
    raise InvalidConfigError(
        f"The {what} given ({given!r}) does not commit with the store: it {problem}, "
        f"and a block's commit writes its {what} in the store's one atomic step",
        path=what,
        hint=f"leave it out: IdempotencyPlugin() and AuditPlugin() then use store.{what}; "
        f"or build a {kind} on store.client with prefix=store.prefix",
    )


@runtime_checkable
class Codec(Protocol):
    """Turns a snapshot dict into bytes and back.

    ``key`` and ``version`` are the instance key and the version the bytes
    are stored under; an encrypting codec binds its ciphertext to both so a
    snapshot copied to another key or version fails to decode. ``decode``
    raises ``SnapshotCorruptError`` for bytes it cannot read; ``encode``
    raises ``TypeError`` naming the path of a value it cannot represent.
    """

    name: str

    def encode(self, snapshot: Mapping[str, Any], *, key: str, version: int) -> bytes: ...

    def decode(self, data: bytes, *, key: str, version: int) -> dict[str, Any]: ...


class OpDriver(Protocol):
    """Runs a :data:`StoreOp` to its result with blocking I/O, in one loop
    (``key``: the instance it concerns, for errors)."""

    def run(self, op: StoreOp[T], key: str | None = None) -> T: ...


class AsyncOpDriver(Protocol):
    """:class:`OpDriver` for an asyncio store: the same loop, awaited."""

    async def run(self, op: StoreOp[T], key: str | None = None) -> T: ...


class StoreOps(Protocol):
    """What a persisted block composes, as operations (one implementation
    for a store and its asyncio twin): the block is itself one generator
    that ``yield from``-s them, and the store's ``driver`` runs it, so a
    block's open, sends and commit each take one driver loop. Errors reach
    the block as the documented ``XsmError``s, as from the methods. The
    inbox's :class:`InboxOps` run on the store's driver too: an inbox the
    store :meth:`~StateStore.shares_commit` with reaches the same data."""

    def open_op(self, request: records.OpenRequest) -> StoreOp[records.OpenResult]:
        """:meth:`StateStore.open`, as an operation: its claims go to the
        store's inbox (a block checked the one it was given shares it)."""

    def commit_op(
        self, unit: records.CommitUnit, *, log: Any = None
    ) -> StoreOp[records.CommitResult]:
        """:meth:`StateStore.commit`, as an operation (``log``, checked by
        the block when it was built: the log whose settings the entries are
        written with; None: the store's)."""

    def acquire_lock_op(self, key: str, token: str, ttl_ms: int) -> StoreOp[int]:
        """:meth:`StateStore.acquire_lock`, as an operation."""

    def release_lock_op(self, key: str, token: str) -> StoreOp[bool]:
        """:meth:`StateStore.release_lock`, as an operation."""

    def wait_unlocked_op(self, key: str, seconds: float) -> StoreOp[bool]:
        """:meth:`StateStore.wait_unlocked`, as an operation."""


class InboxOps(Protocol):
    """The inbox's part of a block, as operations (see :class:`StoreOps`)."""

    def claim_op(self, request: records.ClaimRequest) -> StoreOp[records.ClaimOutcome]:
        """:meth:`InboxStore.claim`, as an operation."""

    def release_op(self, release: records.InboxRelease) -> StoreOp[bool]:
        """:meth:`InboxStore.release`, as an operation."""


class StateStore(StoreOps, Protocol):
    """Durable, versioned instance records.

    Guarantees every implementation keeps:

    * ``commit`` is one atomic compare-and-set on the version: on a mismatch
      it raises ``ConflictError(actual=...)`` and writes nothing. A commit
      whose ``commit_id`` is already applied returns that result with
      ``replayed=True`` (client retries after a timeout are safe).
    * A held lock fences writes: a commit without the holder's token raises
      ``ConflictError(reason="lock")``.
    * Versions never restart for a key, not after ``delete`` nor ``forget``.
    * Oversized snapshots raise ``SnapshotTooLargeError`` before any write;
      undecodable records raise ``SnapshotCorruptError``; an unreachable
      backend raises ``StoreUnavailableError``.
    * ``health()`` never raises.

    Every method here is required; there are no optional ones to probe for.
    ``clock`` (epoch ms) is the clock blocks and timer scanners of this
    store arm deadlines and stamp log records with; ``driver`` runs the
    store's operations (:class:`StoreOps`).

    A store is the whole backend: ``inbox``, ``log`` and ``outbox`` are its
    parts (its idempotency rows, its transition log, the delivery side of
    the events its commits emit), on its own data, so they share its
    commit (:meth:`shares_commit` is true of each). A block with an
    ``IdempotencyPlugin`` or ``AuditPlugin`` that names no inbox or log
    uses them.
    """

    max_snapshot_bytes: int
    lock_ttl_ms: int
    clock: Callable[[], int]

    @property
    def inbox(self) -> InboxStore:
        """The store's idempotency inbox."""

    @property
    def log(self) -> TransitionLogStore:
        """The store's transition log."""

    @property
    def outbox(self) -> OutboxReader:
        """The delivery side of the events the store's commits emit."""

    @property
    def driver(self) -> OpDriver:
        """Runs this store's operations."""

    def load(self, key: str) -> records.StoredRecord | None:
        """The record, or None when absent (or expired)."""

    def open(
        self, request: records.OpenRequest, *, inbox: InboxStore | None = None
    ) -> records.OpenResult:
        """Take the lock, claim ``request.claims`` in ``inbox`` (None: the
        store's own; one given must :meth:`shares_commit`, see
        :func:`require_shared_commit`) and load the record in one step. A
        busy lock returns ``lock_busy_ms > 0`` with no claim taken."""

    def commit(
        self,
        unit: records.CommitUnit,
        *,
        inbox: InboxStore | None = None,
        log: TransitionLogStore | None = None,
    ) -> records.CommitResult:
        """Apply ``unit``, its marks to ``inbox`` and its entries to
        ``log`` (None: the store's own), in one atomic step: all of it
        lands or none of it. An ``inbox`` or ``log`` this store does not
        :meth:`shares_commit` with is an ``InvalidConfigError`` before any
        write (:func:`require_shared_commit`)."""

    def shares_commit(self, other: object) -> bool:
        """True when ``other`` (an inbox or log) commits atomically with us:
        the only inbox and log a block of this store may use."""

    def save(self, key: str, snapshot: Mapping[str, Any], *, expected_version: int) -> int:
        """Compare-and-set the snapshot alone; returns the new version. The
        record's ``machine_id`` and ``machine_version`` are the ones the
        snapshot names (``""`` where it names none)."""

    def acquire_lock(self, key: str, token: str, ttl_ms: int) -> int:
        """Try once: 0 when the caller now holds the lock (or already did
        with this token), else the milliseconds the current holder keeps it."""

    def release_lock(self, key: str, token: str) -> bool:
        """Compare-and-delete; False when the lock was not ours any more."""

    def wait_unlocked(self, key: str, seconds: float) -> bool:
        """Block until a release of ``key``'s lock may have happened (True
        when one woke it), at most ``seconds``; may wake early. Pessimistic
        waiters and ``StoreLock`` call it between tries."""

    def delete(self, key: str) -> bool:
        """Remove the record and its index entries. A held lock and the
        transition log stay. True when something was deleted."""

    def forget(self, key: str) -> dict[str, int]:
        """Erase the record, deadlines, lock, timer bookkeeping and log of
        one instance atomically; returns counts per kind. Idempotency
        receipts are kept until they expire (see InboxStore.forget)."""

    def list_keys(self, prefix: str = "", *, machine: str | None = None) -> Iterator[str]:
        """Live keys starting with ``prefix`` (matched literally, glob
        characters included), in code-point order, paged internally."""

    def list_page(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int = 50,
        machine: str | None = None,
        state: str | None = None,
    ) -> tuple[list[str], str]:
        """One page of keys after the cursor ``after``; returns the keys and
        the next cursor ('' at the end). ``state`` keeps instances whose
        active state ids include this full dotted id."""

    def due_keys(
        self, until_wall: float | _dt.datetime, *, limit: int = 100, prefix: str = ""
    ) -> list[tuple[str, int]]:
        """Keys whose earliest pending deadline is due at ``until_wall``
        (seconds since the epoch or an aware datetime), earliest first, as
        ``(key, due_ms)``; only keys starting with ``prefix``. Costs
        O(log N + due)."""

    def record_timer_failure(
        self,
        key: str,
        *,
        expected_version: int,
        failures: records.TimerFailures,
        next_due_ms: int | None,
    ) -> bool:
        """Replace the timer bookkeeping and re-index the key's next due
        time, only if the record is still at ``expected_version``."""

    def dead_letters(self, *, limit: int = 100) -> list[tuple[str, int]]:
        """Keys holding dead-lettered timers, as ``(key, parked_ms)``."""

    def park(self, key: str, *, reason: str) -> bool:
        """Dead-letter a record no scan can read (``reason`` says why), so
        timer scans stop re-reading it; False when there was none."""

    def machine_ids(self, keys: Sequence[str]) -> dict[str, str]:
        """Key -> machine id of its record, '' for a key with no record, in
        one step for many keys (for filtering listings by machine)."""

    def health(self) -> dict[str, Any]:
        """``{"ok": bool, ...}``; never raises, never leaks addresses."""


class AsyncStateStore(StoreOps, Protocol):
    """The asyncio twin of :class:`StateStore`: same guarantees, awaitable
    methods with the same names, the same operations run by an awaitable
    ``driver``; its parts are the asyncio ``inbox`` and ``log`` (outbox
    workers are synchronous and read ``StateStore.outbox``)."""

    max_snapshot_bytes: int
    lock_ttl_ms: int
    clock: Callable[[], int]

    @property
    def inbox(self) -> AsyncInboxStore: ...

    @property
    def log(self) -> AsyncTransitionLogStore: ...

    @property
    def driver(self) -> AsyncOpDriver:
        """Runs this store's operations, awaited."""

    async def load(self, key: str) -> records.StoredRecord | None: ...

    async def open(
        self, request: records.OpenRequest, *, inbox: AsyncInboxStore | None = None
    ) -> records.OpenResult: ...

    async def commit(
        self,
        unit: records.CommitUnit,
        *,
        inbox: AsyncInboxStore | None = None,
        log: AsyncTransitionLogStore | None = None,
    ) -> records.CommitResult: ...

    def shares_commit(self, other: object) -> bool: ...

    async def acquire_lock(self, key: str, token: str, ttl_ms: int) -> int: ...

    async def release_lock(self, key: str, token: str) -> bool: ...

    async def wait_unlocked(self, key: str, seconds: float) -> bool: ...

    async def park(self, key: str, *, reason: str) -> bool: ...

    async def health(self) -> dict[str, Any]: ...


class InboxStore(InboxOps, Protocol):
    """Idempotency rows: the first claim wins.

    * ``claim`` returns CLAIMED (caller owns a lease of ``lease_ms``),
      DONE (same fingerprint finished: the stored receipt), IN_FLIGHT
      (another owner's lease runs; ``retry_after_ms``) or MISMATCH.
      An expired lease counts as absent. Expiry uses the backend's clock
      (the Redis server's ``TIME`` for Redis).
    * ``mark`` turns the caller's claim into a finished row kept
      ``ttl_ms``; ``release`` drops an unfinished claim of the caller.
    * ``purge_expired`` removes at most ``limit`` rows in all (None: every
      expired row) and costs the number of expired rows, not the total;
      ``count_expired`` says how many it would remove now.
    * ``forget(scope)`` removes that scope's rows and nothing else;
      ``forget_instance(key)`` removes the rows used with one instance, in
      every scope, and nothing else.
    """

    def claim(self, request: records.ClaimRequest) -> records.ClaimOutcome: ...

    def mark(self, mark: records.InboxMark) -> bool: ...

    def release(self, release: records.InboxRelease) -> bool: ...

    def get(self, scope: str, instance_key: str, idempotency_key: str) -> dict[str, Any] | None:
        """The row as a dict (state, fingerprint, receipt, expires_ms), for
        inspection; None when absent or expired."""

    def purge_expired(self, *, limit: int | None = 1000) -> int: ...

    def count_expired(self) -> int:
        """What ``purge_expired(limit=None)`` would remove now."""

    def forget(self, scope: str) -> int: ...

    def forget_instance(self, instance_key: str) -> int:
        """Remove the rows of ``instance_key``, expired ones included."""

    def count_for_instance(self, instance_key: str) -> int:
        """The rows :meth:`forget_instance` would remove now."""


class AsyncInboxStore(InboxOps, Protocol):
    async def claim(self, request: records.ClaimRequest) -> records.ClaimOutcome: ...

    async def mark(self, mark: records.InboxMark) -> bool: ...

    async def release(self, release: records.InboxRelease) -> bool: ...


class TransitionLogStore(Protocol):
    """Per-instance append-only transition log.

    * seq is 1, 2, 3... per key, never reused even after purging.
    * ``read`` pages forward: records with seq > ``after_seq``, at most
      ``limit``.
    * ``purge_older_than`` removes records older than the cutoff, page by
      page, and returns how many it removed.
    """

    def append(self, record: records.TransitionRecord) -> int:
        """Append with the record's own seq (must be above the last);
        returns it."""

    def append_next(self, key: str, entry: records.LogEntry, *, version: int) -> int:
        """Append with seq = last + 1; returns the seq."""

    def read(
        self, key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[records.TransitionRecord]: ...

    def read_last(self, key: str, *, count: int = 20) -> list[records.TransitionRecord]:
        """The newest ``count`` records, oldest first."""

    def purge_older_than(self, cutoff: float | _dt.datetime, *, key: str | None = None) -> int: ...

    def count_older_than(self, cutoff: float | _dt.datetime, *, key: str | None = None) -> int:
        """What ``purge_older_than`` with these arguments would remove now."""

    def forget(self, key: str) -> int: ...


class AsyncTransitionLogStore(Protocol):
    async def append_next(self, key: str, entry: records.LogEntry, *, version: int) -> int: ...

    async def read(
        self, key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[records.TransitionRecord]: ...
