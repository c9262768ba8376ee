"""Value objects shared by every store, inbox, log and the runtime.

Times are integer milliseconds since the Unix epoch (``*_ms``), the unit of
Redis' sorted-set scores and of ``TIME``. Records are frozen and slotted:
what a backend returns cannot be mutated by the caller.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeAlias

from django_xsm.brief import brief
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError

from .outbox import Emitted

__all__ = [
    "COMMIT_HISTORY",
    "MAX_EPOCH_MS",
    "MAX_VERSION",
    "ClaimOutcome",
    "ClaimRequest",
    "ClaimStatus",
    "CommitResult",
    "CommitUnit",
    "InboxMark",
    "InboxRelease",
    "LogEntry",
    "OpenRequest",
    "OpenResult",
    "StoredRecord",
    "TimerFailure",
    "TimerFailures",
    "TransitionRecord",
    "check_commit_id",
    "ms_to_datetime",
    "owner_machine_id",
    "require_text",
    "save_unit",
]


# --- idempotency claims: the right to run one key's work once ---------------


class ClaimStatus:
    """What a claim found (string constants, stable across backends)."""

    CLAIMED = "claimed"  # the caller owns the lease now (or already did)
    DONE = "done"  # finished earlier with the same fingerprint: replay
    IN_FLIGHT = "in_flight"  # another owner's lease is still running
    MISMATCH = "mismatch"  # same key, different fingerprint


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """Claim an idempotency key for one instance.

    Rows are addressed by (``scope``, ``instance_key``, ``idempotency_key``):
    a scope is the principal (tenant, account, user) and a key is only ever
    given explicitly. ``lease_ms`` bounds how long a crashed owner can block
    the key; ``ttl_ms`` is how long the finished receipt is kept.
    """

    scope: str
    instance_key: str
    idempotency_key: str
    fingerprint: str
    owner: str
    lease_ms: int


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    status: str
    request: ClaimRequest
    receipt: Any = None  # the stored receipt when DONE
    retry_after_ms: int = 0  # remaining lease when IN_FLIGHT


@dataclass(frozen=True, slots=True)
class InboxMark:
    """Turn an owned claim into a finished row holding ``receipt``.

    ``receipt`` must be JSON-ready; it is returned verbatim to duplicates.
    """

    claim: ClaimRequest
    receipt: Any
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class InboxRelease:
    """Drop an owned, unfinished claim (the event was refused or failed)."""

    claim: ClaimRequest


def require_text(value: object, what: str, *, hint: str = "") -> str:
    """Return ``value`` if it is a ``str``, else raise :class:`ArgumentTypeError`.

    Audit metadata (actor, reason, correlation id) lands in the transition
    log next to the snapshot in one commit; a value the log cannot store
    must be refused before any I/O, never half way through that commit.
    """
    if not isinstance(value, str):
        raise ArgumentTypeError(what, value, expected="a str", hint=hint)
    return value


#: Recent commit ids a stored record remembers (with the version each made),
#: so a client retry is recognised even after other writers committed on
#: top of it. Every backend keeps the same number.
COMMIT_HISTORY = 8
_COMMIT_ID = re.compile(r"[\x21-\x7e]{1,128}")


def check_commit_id(commit_id: object) -> None:
    """A commit id is 1-128 printable ASCII characters without spaces."""
    # The id is how a retried commit is recognised: an empty one would make
    # every id-less commit a "replay" of the previous one.
    if not isinstance(commit_id, str) or not _COMMIT_ID.fullmatch(commit_id):
        raise InvalidConfigError(
            "commit_id must be 1-128 printable ASCII characters without spaces, "
            f"got {brief(commit_id)}",
            path="commit_id",
            hint="use secrets.token_hex(12)",
        )


#: The latest epoch millisecond a ``datetime`` can hold (9999-12-31).
MAX_EPOCH_MS = 253_402_300_799_999
#: Versions are below this: a Lua number (a double) holds every int below
#: 2**53 exactly, and the scripts compare and count versions as numbers. A
#: stored version beyond it is damage, never reached by commits.
MAX_VERSION = 2**53


def ms_to_datetime(ms: int) -> _dt.datetime:
    """Epoch milliseconds as an aware UTC datetime."""
    return _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.UTC)


@dataclass(frozen=True, slots=True)
class TimerFailure:
    """Bookkeeping for a delayed transition whose firing raised.

    Keyed in :attr:`StoredRecord.timer_failures` by ``"<entry>:<event type>"``
    (the deadline's identity). ``dead`` deadlines are parked: scanners skip
    them until an operator fires or forgets them, or the state is left.
    """

    attempts: int
    next_attempt_ms: int
    dead: bool = False
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimerFailure:
        """Raises ``ValueError`` for anything that is not a failure as
        :meth:`to_dict` writes it (Infinity, a list, a missing field...)."""
        try:
            failure = cls(
                attempts=int(data["attempts"]),
                next_attempt_ms=int(data["next_attempt_ms"]),
                dead=bool(data.get("dead", False)),
                error=str(data.get("error", "")),
            )
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise ValueError(f"not a timer failure ({type(exc).__name__})") from None
        if not 0 <= failure.next_attempt_ms <= MAX_EPOCH_MS:
            raise ValueError("next_attempt_ms is out of range")
        return failure


def owner_machine_id(machine_id: str, snapshot: Mapping[str, Any]) -> str:
    """The machine that owns a record: its stored machine id, else (a record
    saved without one) the id its snapshot names; ``""`` when neither does."""
    return machine_id or str(snapshot.get("machine_id", "") or "")


#: A record's timer bookkeeping: deadline id -> its failure so far.
TimerFailures: TypeAlias = Mapping[str, TimerFailure]


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One persisted instance as a store returns it.

    ``version`` counts the commits that changed the snapshot; it never
    restarts for a key, not even after ``delete``/``forget`` (a recreated
    instance continues above the old number, so a paused writer cannot
    commit against a newer instance by accident).
    """

    key: str
    snapshot: Mapping[str, Any]
    version: int
    machine_version: str
    updated_ms: int
    machine_id: str = ""
    timer_failures: Mapping[str, TimerFailure] = field(default_factory=dict)

    @property
    def owner(self) -> str:
        """The id of the machine this record belongs to (see :func:`owner_machine_id`)."""
        return owner_machine_id(self.machine_id, self.snapshot)

    @property
    def updated_at(self) -> _dt.datetime:
        return ms_to_datetime(self.updated_ms)


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    """One entry of an instance's transition log (audit trail).

    ``seq`` is 1, 2, 3... per key in commit order and never reused;
    ``version`` is the snapshot version the commit produced (records of a
    commit that changed no state carry the unchanged version). ``payload``
    is already redacted. ``from_state`` / ``to_state`` are state values.
    """

    key: str
    seq: int
    version: int
    event_type: str
    payload: Mapping[str, Any]
    actor: str
    reason: str
    from_state: Any
    to_state: Any
    idempotency_key: str
    correlation_id: str
    timestamp_ms: int
    accepted: bool = True

    @property
    def timestamp(self) -> _dt.datetime:
        return ms_to_datetime(self.timestamp_ms)

    @property
    def entry(self) -> LogEntry:
        """This record without its ``key``, ``seq`` and ``version``."""
        return LogEntry(**_entry_values(self))

    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return values | {"payload": dict(self.payload)}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A transition record before it has a ``seq`` and ``version``.

    The store assigns both when the commit lands (seq = previous + 1,
    version = the version the commit produced).
    """

    event_type: str
    payload: Mapping[str, Any]
    actor: str
    reason: str
    from_state: Any
    to_state: Any
    idempotency_key: str
    correlation_id: str
    timestamp_ms: int
    accepted: bool = True

    def __post_init__(self) -> None:
        # Every backend stores these fields as text next to the snapshot in
        # one commit: a wrong type must fail here, before any write.
        require_text(self.event_type, "event_type")
        require_text(self.actor, "actor", hint="pass the user name or id as a str")
        require_text(self.reason, "reason")
        require_text(self.idempotency_key, "idempotency_key")
        require_text(self.correlation_id, "correlation_id")
        if not isinstance(self.timestamp_ms, int) or isinstance(self.timestamp_ms, bool):
            raise ArgumentTypeError("timestamp_ms", self.timestamp_ms, expected="an int")
        if not isinstance(self.accepted, bool):
            raise ArgumentTypeError("accepted", self.accepted, expected="a bool")

    def to_record(self, key: str, seq: int, version: int) -> TransitionRecord:
        return TransitionRecord(key=key, seq=seq, version=version, **_entry_values(self))


#: The fields a LogEntry and its TransitionRecord have in common.
_ENTRY_FIELDS = tuple(f.name for f in fields(LogEntry))


def _entry_values(source: LogEntry | TransitionRecord) -> dict[str, Any]:
    return {name: getattr(source, name) for name in _ENTRY_FIELDS}


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """Everything a block needs at open, so a backend can do it in one step.

    ``lock_token`` set means: take the instance lock for ``lock_ttl_ms``
    (pessimistic); ``claims`` are idempotency claims already known (a view's
    request key). A backend applies claims only if the lock (when asked
    for) was free, and takes the lock only if every claim came back
    CLAIMED, so a refused open leaves nothing behind.
    """

    key: str
    lock_token: str = ""
    lock_ttl_ms: int = 0
    claims: tuple[ClaimRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class OpenResult:
    record: StoredRecord | None
    floor: int = 0  # version a deleted/forgotten key reached (record absent)
    locked: bool = False  # the lock was taken for the caller
    lock_busy_ms: int = 0  # > 0: someone else holds it, for this long
    claims: tuple[ClaimOutcome, ...] = ()
    lock_held_ms: int = 0  # an open without a lock: another holds it, this long


@dataclass(frozen=True, slots=True)
class CommitUnit:
    """One block's changes, applied all-or-nothing where the backend can.

    Fences: the stored version must equal ``expected_version`` (0 = the key
    must not exist), a held lock must carry ``lock_token`` (an optimistic
    writer has none, so it loses to a pessimistic holder), and every mark's
    claim must still be owned by this writer. Checks come before writes.

    Writes: the snapshot (only when ``snapshot`` is not None; the version
    then becomes :attr:`new_version`: ``expected_version + 1``, or
    ``floor + 1`` when creating a key that existed before; creating also
    requires the stored floor to still equal ``floor``), the deadline
    index (``next_due_ms``, None = no pending deadline), the key and state
    indexes, ``timer_failures``,
    inbox marks and releases, log entries (seq = previous + 1, stamped with
    the resulting version), the ``emitted`` events into the outbox (in
    order, stamped with the resulting version; a unit that emits also
    writes its snapshot, so the version moves) and finally the lock release.

    ``commit_id`` makes the commit idempotent: a retried commit that finds
    its own id already applied reports success instead of a conflict.
    """

    key: str
    commit_id: str
    expected_version: int
    machine_id: str
    machine_version: str
    snapshot: Mapping[str, Any] | None = None
    floor: int = 0
    state_ids: tuple[str, ...] = ()
    next_due_ms: int | None = None
    timer_failures: Mapping[str, TimerFailure] | None = None
    lock_token: str = ""
    release_lock: bool = False
    marks: tuple[InboxMark, ...] = ()
    releases: tuple[InboxRelease, ...] = ()
    log_entries: tuple[LogEntry, ...] = ()
    emitted: tuple[Emitted, ...] = ()

    @property
    def new_version(self) -> int:
        """The version this unit produces when it writes a snapshot."""
        return max(self.expected_version, self.floor) + 1

    @property
    def is_empty(self) -> bool:
        """Nothing to write except, maybe, a lock release."""
        return (
            self.snapshot is None
            and self.timer_failures is None
            and not self.marks
            and not self.releases
            and not self.log_entries
            and not self.emitted
        )


def save_unit(
    key: str, snapshot: Mapping[str, Any], *, expected_version: int, floor: int
) -> CommitUnit:
    """The unit of ``StateStore.save``: the snapshot alone, under a fresh
    commit id, owned by the machine and machine version the snapshot names
    (``""`` where it names none). ``floor`` is the stored floor when
    creating (``expected_version`` 0), else 0."""
    return CommitUnit(
        key=key,
        commit_id=secrets.token_hex(12),
        expected_version=expected_version,
        machine_id=owner_machine_id("", snapshot),
        machine_version=str(snapshot.get("machine_version", "") or ""),
        snapshot=snapshot,
        floor=floor,
    )


@dataclass(frozen=True, slots=True)
class CommitResult:
    """``version`` after the commit; ``first_seq`` of its log entries (0
    when none); ``replayed`` when a retried commit was recognised."""

    version: int
    first_seq: int = 0
    updated_ms: int = 0
    replayed: bool = False
