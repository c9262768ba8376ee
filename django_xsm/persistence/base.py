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
import math
import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from django_xsm.brief import brief
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError

from . import records

__all__ = [
    "MAX_KEY_LENGTH",
    "MAX_LIMIT",
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
    "check_listing",
    "check_log_read",
    "check_read_last",
    "iter_pages",
    "require_shared_commit",
    "retry_after_seconds",
    "system_clock_ms",
    "validate_key",
    "validate_limit",
    "validate_positive_int",
    "validate_prefix",
    "validate_seconds",
    "validate_text",
    "validate_ttl_s",
    "wall_to_ms",
]

T = TypeVar("T")

#: One store operation written once, with no I/O: a generator that yields
#: the store's own requests (for Redis: script calls, commands, pipelines),
#: receives each reply and returns its result. The store's ``driver`` runs
#: it; a request that fails is thrown back in at the ``yield`` that asked.
StoreOp: TypeAlias = Generator[Any, Any, T]

#: Longest instance key, idempotency key or scope accepted (characters).
MAX_KEY_LENGTH = 512

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A namespace prefix becomes part of a Redis Cluster hash tag and of glob
# patterns, so it is restricted to a conservative alphabet.
_PREFIX = re.compile(r"[A-Za-z0-9_.\-:/]{1,64}")


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


def validate_key(value: object, *, what: str = "key") -> str:
    """Return ``value`` if it is a usable key, else raise InvalidConfigError.

    Keys are non-empty strings of at most :data:`MAX_KEY_LENGTH` characters
    without control characters (they appear in logs, headers and index
    members separated by control characters).
    """
    if not isinstance(value, str):
        raise ArgumentTypeError(
            what, value, expected="a str", hint="pass the instance key as a str such as 'order:42'"
        )
    if not value:
        raise InvalidConfigError(f"{what} must not be empty", path=what)
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidConfigError(
            f"{what} is {len(value)} characters long, over {MAX_KEY_LENGTH}",
            path=what,
            hint="use a shorter key, e.g. a hash of the long one",
        )
    if _CONTROL.search(value):
        raise InvalidConfigError(
            f"{what} {brief(value)} contains control characters",
            path=what,
            hint="use printable characters only",
        )
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            # Redis keys, bucket hashes and log lines are UTF-8: a lone
            # surrogate ("\ud800", which json.loads accepts) has no encoding.
            raise InvalidConfigError(
                f"{what} {brief(value)} contains a lone surrogate (not valid Unicode text)",
                path=what,
                hint="decode the key from valid UTF-8",
            ) from None
    return value


def validate_text(value: object, name: str, *, optional: bool = False) -> str | None:
    """``value`` if it is a ``str`` (or None when ``optional``) that UTF-8
    can encode (no lone surrogate such as ``"\\ud800"``: Redis, logs and
    indexes take UTF-8), else :class:`ArgumentTypeError` /
    :class:`InvalidConfigError` naming the argument."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(name, value, expected="a str or None" if optional else "a str")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise InvalidConfigError(
                f"{name} {brief(value)} contains a lone surrogate (not valid Unicode text)",
                path=name,
                hint="decode the text from valid UTF-8",
            ) from None
    return value


def check_listing(
    prefix: object, after: object, limit: object, machine: object, state: object
) -> None:
    """The arguments of ``list_page``, checked before any I/O."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidConfigError(
            f"limit must be an int from 1 to 10000, got {brief(limit)}", path="limit"
        )
    validate_text(prefix, "prefix")
    validate_text(after, "after")
    validate_text(machine, "machine", optional=True)
    validate_text(state, "state", optional=True)


def validate_positive_int(value: object, name: str) -> int:
    """``value`` if it is an int >= 1 (not a bool), else InvalidConfigError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(f"{name} must be a positive int, got {brief(value)}", path=name)
    return value


def check_log_read(after_seq: object, limit: object) -> None:
    """The arguments of ``TransitionLogStore.read``, checked before any
    I/O: ``after_seq`` an int >= 0, ``limit`` a positive int or None."""
    if isinstance(after_seq, bool) or not isinstance(after_seq, int):
        raise ArgumentTypeError("after_seq", after_seq, expected="an int >= 0")
    if not 0 <= after_seq < 2**63:  # a stream id's sequence is 64-bit
        raise InvalidConfigError(
            f"after_seq must be an int from 0 to 2**63 - 1, got {brief(after_seq)}",
            path="after_seq",
        )
    validate_limit(limit, optional=True)


def check_read_last(count: object) -> None:
    """``count`` of ``TransitionLogStore.read_last``: an int up to
    :data:`MAX_LIMIT` (below 1 reads nothing)."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise ArgumentTypeError("count", count, expected="an int")
    if count > MAX_LIMIT:
        raise InvalidConfigError(
            f"count must be at most {MAX_LIMIT}, got {brief(count)}", path="count"
        )


def validate_seconds(value: object, name: str = "seconds") -> float:
    """``value`` if it is a number (not a bool; NaN and negatives pass: a
    wait treats them as no time), else InvalidConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidConfigError(f"{name} must be a number, got {type(value).__name__}", path=name)
    return value


def validate_ttl_s(value: object) -> float | None:
    """``ttl_s`` of a store: None (no expiry) or finite seconds of at least
    one millisecond. A smaller value would round to 0 ms, which Redis reads
    as "no expiry"; inf and NaN have no expiry time at all."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0.001
    ):
        raise InvalidConfigError(
            f"ttl_s must be None or finite seconds of at least 0.001 (1 ms), got {brief(value)}",
            path="ttl_s",
            hint="pass None for instances that never expire",
        )
    if value * 1000 >= 2**53:
        raise InvalidConfigError(
            f"ttl_s {brief(value)} is too large", path="ttl_s", hint="pass None"
        )
    return value


#: The most items one call may ask for (a page, a scan, a log read): far
#: beyond any sensible page, and an int every client and script can encode.
MAX_LIMIT = 1_000_000


def validate_limit(value: object, *, name: str = "limit", optional: bool = False) -> int | None:
    """``value`` if it is an int from 1 to :data:`MAX_LIMIT` (or None when
    ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        allowed = f"an int from 1 to {MAX_LIMIT}" + (" or None" if optional else "")
        raise InvalidConfigError(f"{name} must be {allowed}, got {brief(value)}", path=name)
    return value


def validate_prefix(prefix: object) -> str:
    """A namespace prefix: 1-64 of ``A-Z a-z 0-9 _ . - : /``."""
    if not isinstance(prefix, str) or not prefix:
        raise InvalidConfigError(
            "A namespace prefix is required",
            path="prefix",
            hint="pass prefix='shop' (one namespace per application)",
        )
    if not _PREFIX.fullmatch(prefix):
        raise InvalidConfigError(
            f"Prefix {brief(prefix)} may only contain letters, digits and _ . - : / (at most 64)",
            path="prefix",
            hint="braces and glob characters would break hash tags and patterns",
        )
    if prefix.endswith(":"):
        bare = prefix.rstrip(":")
        raise InvalidConfigError(
            f"Prefix {prefix!r} ends with ':'",
            path="prefix",
            hint=f"the separator is added for you: pass prefix={bare!r}"
            if bare
            else "name the namespace, e.g. prefix='shop'",
        )
    return prefix


def wall_to_ms(when: float | int | _dt.datetime) -> int:
    """Seconds since the epoch (as from ``time.time()``) or an aware
    datetime, as integer milliseconds."""
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            raise InvalidConfigError(
                "A naive datetime has no defined wall-clock instant",
                path="until_wall",
                hint="pass an aware datetime (tzinfo=UTC) or time.time()",
            )
        return _seconds_to_ms(when.timestamp())
    if isinstance(when, bool) or not isinstance(when, int | float):
        raise InvalidConfigError(
            f"Expected seconds since the epoch, got {type(when).__name__}",
            path="until_wall",
        )
    if not -_MAX_WALL_S <= when <= _MAX_WALL_S:  # also false for NaN
        raise InvalidConfigError(
            f"Expected seconds since the epoch, got {brief(when)}",
            path="until_wall",
            hint="pass a finite time such as time.time()",
        )
    return _seconds_to_ms(when)


#: Seconds either side of the epoch a wall time may be (about 285 000
#: years): its milliseconds stay exact as a double (Redis scores, Lua), and
#: inf, NaN and huge ints are refused instead of failing in a conversion.
_MAX_WALL_S = 2**53 // 1000


def _seconds_to_ms(seconds: float) -> int:
    # ``ms / 1000 * 1000`` is not always ``ms`` in binary floating point
    # (1 in ~160 epoch values comes back a hair below), and truncating
    # that would skip a deadline due exactly "now". Within a microsecond of
    # a whole millisecond, take that millisecond; otherwise floor.
    ms = seconds * 1000
    nearest = round(ms)
    return int(nearest) if abs(ms - nearest) < 1e-3 else math.floor(ms)


def require_shared_commit(store: Any, *, inbox: object = None, log: object = None) -> None:
    """The one commit rule: a block's inbox and log commit in the store's
    own atomic step (``store.shares_commit``), so a commit lands whole or
    not at all. Anything else is an ``InvalidConfigError``, raised before
    any I/O: there is no commit that writes them one after another."""
    for what, other in (("inbox", inbox), ("log", log)):
        if other is not None and not store.shares_commit(other):
            raise InvalidConfigError(
                f"the {what} ({type(other).__name__}) does not commit with the store "
                f"({type(store).__name__}): a commit must write them in one atomic step",
                path=what,
                hint="put the inbox and the log on the store's own Redis, with its prefix "
                "and client kind (e.g. RedisInbox(store.client, prefix=store.prefix)); "
                "MemoryStore takes MemoryInbox and MemoryLog",
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

    def open_op(
        self, request: records.OpenRequest, *, inbox: Any = None
    ) -> StoreOp[records.OpenResult]:
        """:meth:`StateStore.open`, as an operation."""

    def commit_op(
        self, unit: records.CommitUnit, *, inbox: Any = None, log: Any = None
    ) -> StoreOp[records.CommitResult]:
        """:meth:`StateStore.commit`, as an operation."""

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
    """

    max_snapshot_bytes: int
    lock_ttl_ms: int
    clock: Callable[[], int]

    @property
    def driver(self) -> OpDriver:
        """Runs this store's operations."""

    def load(self, key: str) -> records.StoredRecord | None:
        """The record, or None when absent (or expired)."""

    def open(
        self, request: records.OpenRequest, *, inbox: InboxStore | None = None
    ) -> records.OpenResult:
        """Take the lock, claim ``request.claims`` in ``inbox`` and load the
        record in one step. Claims need an ``inbox`` that
        :meth:`shares_commit` (see :func:`require_shared_commit`). A busy
        lock returns ``lock_busy_ms > 0`` with no claim taken."""

    def commit(
        self,
        unit: records.CommitUnit,
        *,
        inbox: InboxStore | None = None,
        log: TransitionLogStore | None = None,
    ) -> records.CommitResult:
        """Apply ``unit``, its marks to ``inbox`` and its entries to
        ``log``, in one atomic step: all of it lands or none of it. An
        ``inbox`` or ``log`` this store does not :meth:`shares_commit` with
        is an ``InvalidConfigError`` before any write
        (:func:`require_shared_commit`)."""

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
    ``driver``."""

    max_snapshot_bytes: int
    lock_ttl_ms: int
    clock: Callable[[], int]

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
