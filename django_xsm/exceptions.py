"""Every public django-xsm error, in one place.

All errors derive from :class:`XsmError`, so ``except XsmError`` catches
anything the library raises on purpose; leaves also inherit the natural
built-in base (``ValueError``, ``LookupError``...) so generic handlers keep
working. Each error carries the facts that caused it as attributes (``key``,
``path``, ``expected``...); its message names the thing and suggests the fix.

Every layer raises these classes, so this module imports nothing of the
project or of Django but :mod:`django_xsm.brief` (which imports nothing
either); ``brief`` and ``brief_error`` stay importable from here.
"""

from __future__ import annotations

from typing import Any

from django_xsm.brief import brief, brief_error

__all__ = [
    "ArgumentTypeError",
    "ConflictError",
    "DataTooDeepError",
    "EventNotAcceptedError",
    "EventPermissionError",
    "IdempotencyInFlightError",
    "IdempotencyKeyError",
    "IdempotencyMismatchError",
    "InstanceNotFoundError",
    "InvalidConfigError",
    "InvalidEventError",
    "LockTimeoutError",
    "MicrostepLimitError",
    "MigrationError",
    "NotDurableError",
    "PayloadTooLargeError",
    "ReentrantSendError",
    "ReplayDivergenceError",
    "ReservedEventError",
    "SnapshotCorruptError",
    "SnapshotTooLargeError",
    "StateAssignmentError",
    "StoreAuthenticationError",
    "StoreError",
    "StoreUnavailableError",
    "UnknownEventError",
    "UnknownMachineError",
    "UnsavedInstanceError",
    "UnstorableValueError",
    "XsmError",
    "brief",
    "brief_error",
]


class XsmError(Exception):
    """Root of every django-xsm error: ``message`` is the human text, ``hint``
    (may be empty) how to fix it; ``str(error)`` shows both."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)


# --- configuration and events (engine) ---------------------------------------


class InvalidConfigError(XsmError, ValueError):
    """A machine config, a setting or an argument is invalid. ``path`` is the
    JSON path of the offending part of a config (``"states.cart.on.PAY[0].target"``)
    or the name of the argument or setting; ``problems`` lists every problem
    when several were collected at once (all actions missing from the logic)."""

    def __init__(
        self, message: str, *, path: str = "", hint: str = "", problems: tuple[str, ...] = ()
    ) -> None:
        self.path = path
        self.problems = problems
        text = f"{message} at {path}" if path else message
        super().__init__(text, hint=hint)


class ArgumentTypeError(InvalidConfigError, TypeError):
    """An argument has the wrong type (``actor=None``, ``reason=[]``...);
    raised before any I/O. ``path`` names it, ``expected`` the type it needs."""

    def __init__(self, path: str, value: object, *, expected: str, hint: str = "") -> None:
        self.path = path
        self.problems = ()
        self.expected = expected
        # XsmError's constructor, not InvalidConfigError's: the message
        # already starts with the argument's name (no "... at <path>").
        XsmError.__init__(self, f"{path} must be {expected}, not {type(value).__name__}", hint=hint)


class InvalidEventError(XsmError, TypeError):
    """An event is neither a non-empty string nor a mapping with a ``type``."""

    def __init__(self, message: str, *, event: Any = None, hint: str = "") -> None:
        self.event = event
        super().__init__(message, hint=hint)


class EventNotAcceptedError(XsmError):
    """A strict send took no transition; nothing changed. ``event_type`` is
    the refused event, ``value`` the state value, ``key`` the instance key
    when persisted; ``reason`` is ``"no-transition"`` (no active state has
    one for the event), ``"guard-refused"`` (``guards`` names the guards that
    said no), ``"done"`` (the instance has finished) or ``"unknown-event"``
    (the subclass :class:`UnknownEventError`)."""

    def __init__(
        self,
        event_type: str,
        *,
        value: Any = None,
        key: str | None = None,
        reason: str = "",
        guards: tuple[str, ...] = (),
    ) -> None:
        self.event_type = event_type
        self.value = value
        self.key = key
        self.reason = reason
        self.guards = guards
        where = f" by instance {key!r}" if key else ""
        why = {
            "no-transition": "the current state has no transition for it",
            "guard-refused": "guard " + ", ".join(repr(g) for g in guards) + " said no"
            if guards
            else "its guards said no",
            "done": "the instance has finished",
        }.get(reason, "the current state has no enabled transition for it")
        super().__init__(
            f"Event {event_type!r} was not accepted{where} in state {brief(value)}: {why}",
            hint="check the state value and guards, or send without strict=True to ignore it",
        )


class UnknownEventError(EventNotAcceptedError):
    """No state of the chart can ever take ``event_type`` (no descriptor or
    wildcard matches it: a typo, most likely). Raised before any I/O by every
    API that sends; the engine alone ignores such an event, as XState does.
    ``machine`` is the machine id, ``suggestions`` the closest event types
    (also in the message), ``key`` the instance key when a block refused it."""

    def __init__(
        self,
        event_type: str,
        *,
        machine: str = "",
        suggestions: tuple[str, ...] = (),
        key: str | None = None,
    ) -> None:
        self.event_type = event_type
        self.value = None
        self.key = key
        self.reason = "unknown-event"
        self.guards = ()
        self.machine = machine
        self.suggestions = suggestions
        whose = f"machine {brief(machine)}" if machine else "the machine"
        text = f"Event {brief(event_type)} is unknown to {whose}: no state of its chart takes it"
        if suggestions:
            quoted = [brief(s) for s in suggestions]
            listing = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if quoted[1:] else quoted)
            text += f"; did you mean {listing}?"
        XsmError.__init__(
            self, text, hint="fix the event type, or add a transition for it to the chart"
        )


class ReservedEventError(XsmError, ValueError):
    """An event type only django-xsm sends (``namespace`` ``"xstate"``: timers,
    done and init events; ``"xsm"``: ``xsm.outbox.failed``) came through a
    public API; raised before any I/O (charts may still take them)."""

    def __init__(self, event_type: str, *, namespace: str) -> None:
        self.event_type = event_type
        self.namespace = namespace
        super().__init__(
            f"Event {brief(event_type)} is reserved: {namespace}.* events are sent only by "
            "django-xsm itself (timers, the outbox worker)",
            hint="send an event type of your own; a test that must send it uses "
            "block.send_reserved()",
        )


class EventPermissionError(XsmError):
    """The machine's ``PERMISSIONS`` refuse ``event_type`` to the request's
    user (``may_send`` said no): raised by a ``@stateful_view``'s ``send()``
    before any I/O of the send, so nothing is written; over HTTP a 403
    ``forbidden``. ``machine`` is the machine's name in ``XSM['MACHINES']``,
    ``target`` what the message names (the model's verbose name, else
    ``"instance"``)."""

    def __init__(self, event_type: str, *, machine: str, target: str = "instance") -> None:
        self.event_type = event_type
        self.machine = machine
        super().__init__(
            f"You may not send {event_type} to this {target}",
            hint=f"the PERMISSIONS of machine {machine!r} refused it for this request's user; "
            "log in as a user its rules grant, or change the rules",
        )


class MicrostepLimitError(XsmError, RuntimeError):
    """A macrostep exceeded the microstep cap (an endless ``always`` loop)."""

    def __init__(self, limit: int, *, state_ids: tuple[str, ...] = ()) -> None:
        self.limit = limit
        self.state_ids = state_ids
        super().__init__(
            f"More than {limit} microsteps in one macrostep; last configuration "
            f"{list(state_ids)!r}",
            hint="an eventless ('always') transition or raised event loops "
            "forever; add a guard that becomes false",
        )


class ReentrantSendError(XsmError, RuntimeError):
    """An action sent to its own instance mid-event; nothing was done."""

    def __init__(self, event_type: str) -> None:
        self.event_type = event_type
        super().__init__(
            f"send({event_type!r}) was called while the instance is still processing another event",
            hint="an action must not send to its own instance; queue an internal "
            "event with {'type': 'xstate.raise', 'event': ...} instead",
        )


class MigrationError(XsmError):
    """No migration turns a snapshot of another machine version or chart into this one."""

    def __init__(
        self,
        message: str,
        *,
        machine_id: str = "",
        found_version: str = "",
        expected_version: str = "",
        hint: str = "",
    ) -> None:
        self.machine_id = machine_id
        self.found_version = found_version
        self.expected_version = expected_version
        super().__init__(message, hint=hint)


# --- storage -----------------------------------------------------------------


class StoreError(XsmError):
    """A store operation failed; ``key`` is the instance key when known."""

    def __init__(self, message: str, *, key: str | None = None, hint: str = "") -> None:
        self.key = key
        super().__init__(message, hint=hint)


class NotDurableError(StoreError):
    """A commit (or the one a retry replays) reached the primary, but fewer
    replicas than ``DURABILITY['MIN_REPLICAS']`` acknowledged it in time.
    ``required``/``acknowledged``: replica counts; ``version``: what it
    produced (0: unknown). A retry with the same idempotency key replays the
    commit if it survived a failover, or applies it once if it was lost."""

    def __init__(
        self,
        *,
        key: str | None,
        required: int,
        acknowledged: int,
        version: int = 0,
        retry_after_s: int = 1,
    ) -> None:
        self.required = required
        self.acknowledged = acknowledged
        self.version = version
        self.retry_after_s = retry_after_s
        super().__init__(
            f"The commit is on the primary but only {acknowledged} of the {required} "
            "required replica(s) acknowledged it in time",
            key=key,
            hint="retry with the same idempotency key; check the replicas' health "
            "(INFO replication) or lower DURABILITY['MIN_REPLICAS']",
        )


class StoreUnavailableError(StoreError):
    """The store cannot be reached or refuses writes now (refused, timeout,
    LOADING, READONLY, MASTERDOWN, OOM): the call wrote nothing, or a retry
    is recognised (commit ids). ``retry_after_s`` is a client's hint."""

    def __init__(
        self, message: str, *, key: str | None = None, cause: str = "", retry_after_s: int = 1
    ) -> None:
        self.cause = cause
        self.retry_after_s = retry_after_s
        super().__init__(
            message,
            key=key,
            hint="the store is unreachable or read-only; retry later and check "
            "the store's health() and server logs",
        )


class StoreAuthenticationError(StoreError):
    """The store refused our credentials or ACL permissions: no retry fixes
    it. ``cause`` names the reply or exception class (``"WRONGPASS"``,
    ``"NOPERM"``); the message never holds the password or the address."""

    def __init__(self, message: str, *, key: str | None = None, cause: str = "") -> None:
        self.cause = cause
        super().__init__(
            message,
            key=key,
            hint="fix the credentials in the Redis URL or client (password, "
            "username) or grant the ACL user the commands and keys it needs; "
            "retrying will not help",
        )


class ConflictError(StoreError):
    """A compare-and-set failed; nothing was written. ``expected`` is the
    version this writer loaded, ``actual`` the one found (``None``: gone).
    ``reason`` names the fence: ``"version"`` (another commit came first),
    ``"lock"`` (the writer does not hold the lock; ``held_lock`` is False
    when it never held one) or ``"claim"`` (its idempotency claim was taken
    over after its lease). ``attempts``: the tries of ``retry_on_conflict``."""

    def __init__(
        self,
        key: str,
        *,
        expected: int,
        actual: int | None,
        reason: str = "version",
        retry_after_s: int = 1,
        held_lock: bool = True,
        attempts: int = 0,
    ) -> None:
        self.expected = expected
        self.actual = actual
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.held_lock = held_lock
        self.attempts = attempts
        hint = "another writer committed first; reload and retry (see retry_on_conflict)"
        if reason == "claim":
            text = (
                f"An idempotency claim of {key!r} was taken over by another worker "
                f"before commit (its lease ended; version {actual})"
            )
        elif reason == "lock" and not held_lock:
            text = (
                f"{key!r} was locked by another writer, so this commit was refused "
                f"(expected version {expected}, found {actual})"
            )
            hint = "another writer holds the instance's lock; retry once it is released"
        elif reason == "lock":
            text = (
                f"Lock for {key!r} was lost before commit (expected version "
                f"{expected}, found {actual})"
            )
        else:
            text = f"Version conflict on {key!r}: expected version {expected}, found {actual}"
        if attempts:
            text += f"; gave up after {attempts} attempts"
        super().__init__(text, key=key, hint=hint)


class LockTimeoutError(StoreError):
    """A pessimistic lock stayed busy past ``timeout`` seconds."""

    def __init__(self, key: str, *, timeout: float, retry_after_s: int = 1) -> None:
        self.timeout = timeout
        self.retry_after_s = retry_after_s
        super().__init__(
            f"Lock for {key!r} is held by another worker (waited {timeout:g} s)",
            key=key,
            hint="retry later, or raise PessimisticLock(timeout=...)",
        )


class SnapshotCorruptError(StoreError):
    """A stored record or snapshot cannot be decoded or has the wrong shape.
    ``encrypted``: it is encrypted and no configured key opens it (most
    likely intact: the hint names the keys to set, never erasing it)."""

    def __init__(
        self, message: str, *, key: str | None = None, hint: str = "", encrypted: bool = False
    ) -> None:
        self.encrypted = encrypted
        super().__init__(message, key=key, hint=hint or (_ENCRYPTED if encrypted else _DAMAGED))


_ENCRYPTED = (
    "the data is encrypted and most likely intact: set XSM['CODEC_KEYS'] on every process to "
    "the keys it was written with (newest first; a rotated-out key back at the end), and do "
    "not erase the instance"
)
_DAMAGED = (
    "the stored data is damaged or was written by something else; look at the raw keys with "
    "redis-cli, then erase the instance with 'manage.py xsm_forget KEY' (or restore it from "
    "its transition log)"
)


class SnapshotTooLargeError(StoreError, ValueError):
    """An encoded snapshot exceeds ``max_snapshot_bytes``; nothing was written.
    ``stored``: False for the snapshot a commit would write (a 422
    ``snapshot-too-large``), True for one already stored under a larger
    limit (a 500, the operator's to fix)."""

    def __init__(self, key: str, *, size: int, limit: int, stored: bool = False) -> None:
        self.size = size
        self.limit = limit
        self.stored = stored
        what = "Stored snapshot" if stored else "Snapshot"
        super().__init__(
            f"{what} of {key!r} is {size} bytes, over the limit of {limit} bytes",
            key=key,
            hint="raise max_snapshot_bytes (XSM['MAX_SNAPSHOT_BYTES']) to read it, or "
            "forget the instance"
            if stored
            else "keep large data outside the context (store an id instead) or "
            "raise max_snapshot_bytes",
        )


class PayloadTooLargeError(XsmError, ValueError):
    """An event payload, as the log's compact JSON, is larger than
    ``max_payload_bytes``; raised before the event runs. ``size`` and
    ``limit`` are in bytes; ``event_type`` names the event."""

    def __init__(self, event_type: str, *, size: int, limit: int) -> None:
        self.event_type = event_type
        self.size = size
        self.limit = limit
        super().__init__(
            f"The payload of event {brief(event_type)} is {size} bytes, over the limit "
            f"of {limit} bytes",
            hint="send an id of the data instead of the data, or raise "
            "max_payload_bytes (XSM['MAX_PAYLOAD_BYTES'])",
        )


class UnstorableValueError(XsmError, TypeError, ValueError):
    """A value cannot be stored exactly (a set, an object, NaN, a lone
    surrogate such as ``"\\ud800"``, an int too long for text). Raised
    before any write; ``path`` names it (``$.context.text``)."""

    def __init__(self, path: str, problem: str, *, hint: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {problem}", hint=hint)


class DataTooDeepError(UnstorableValueError, InvalidConfigError):
    """A context, payload or result nested deeper than ``limit`` levels
    (``RecursionError`` territory). Raised before any write; ``path`` names
    the value (``payload``, ``$.result``); over HTTP a 422."""

    def __init__(self, what: str, *, limit: int) -> None:
        self.path = what
        self.problems = ()
        self.limit = limit
        # XsmError's constructor: the two bases build their messages differently.
        text = (
            f"{what} is nested more than {limit} levels deep"
            if what.startswith("$")  # a JSON path: $.payload, $.result
            else f"The {what} is nested more than {limit} levels deep at {what}"
        )
        XsmError.__init__(self, text, hint="flatten it")


class InstanceNotFoundError(StoreError, LookupError):
    """The instance does not exist (and the caller did not ask to create it)."""

    def __init__(self, key: str, *, machine: str = "") -> None:
        self.machine = machine
        what = f"{machine} instance" if machine else "Instance"
        super().__init__(
            f"{what} {key!r} does not exist",
            key=key,
            hint="check the key, or open it with create=True",
        )


class UnknownMachineError(XsmError, LookupError):
    """No machine with this name is registered."""

    def __init__(self, name: str, *, known: tuple[str, ...] = ()) -> None:
        self.name = name
        self.known = known
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"Unknown machine {name!r} (registered: {listing})",
            hint="add it to XSM['MACHINES'] or fix the name",
        )


# --- idempotency and audit -----------------------------------------------------


class IdempotencyKeyError(XsmError, ValueError):
    """An idempotency key is missing where required, or malformed."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message, hint=hint or "send 1-255 printable ASCII characters, e.g. a UUID")


class IdempotencyInFlightError(XsmError):
    """Another worker holds this key's claim, a lease that ends at the
    latest after ``retry_after_s``."""

    def __init__(self, idempotency_key: str, *, scope: str, retry_after_s: int) -> None:
        self.idempotency_key = idempotency_key
        self.scope = scope
        self.retry_after_s = retry_after_s
        super().__init__(
            f"A request with idempotency key {idempotency_key!r} is still in flight",
            hint=f"retry in {retry_after_s} s; the first attempt's result will then be replayed",
        )


class IdempotencyMismatchError(XsmError, ValueError):
    """The key was already used for a different request (fingerprint differs)."""

    def __init__(self, idempotency_key: str, *, scope: str) -> None:
        self.idempotency_key = idempotency_key
        self.scope = scope
        super().__init__(
            f"Idempotency key {idempotency_key!r} was already used with a different request",
            hint="use a new key for a new request; a retry must repeat the "
            "original request exactly",
        )


class ReplayDivergenceError(XsmError):
    """Replaying the transition log did not reproduce a recorded field."""

    def __init__(self, key: str, *, seq: int, field: str, expected: Any, actual: Any) -> None:
        self.key = key
        self.seq = seq
        self.field = field
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Replay of {key!r} diverged at seq {seq}: {field} was recorded as "
            f"{expected!r} but replay gave {actual!r}",
            hint="actions or guards depend on something outside the events "
            "(time, I/O), or the chart changed since the log was written",
        )


# --- model fields (Django glue) ------------------------------------------------


class StateAssignmentError(XsmError, AttributeError):
    """``order.status = "paid"`` on a ``StatechartField``: states change only
    through events. Nothing changed."""

    def __init__(self, model: str, field: str, value: object) -> None:
        self.model = model
        self.field = field
        super().__init__(
            f"{model}.{field} cannot be assigned ({brief(value)}): the state changes only "
            "through events",
            hint=f"send an event instead, e.g. order.{field}.send('PAY')",
        )


class UnsavedInstanceError(XsmError, ValueError):
    """A row has no instance key yet (its pk, or another field the key
    template uses, is empty); raised before any Redis I/O."""

    def __init__(self, model: str, field: str, *, placeholder: str = "pk") -> None:
        self.model = model
        self.field = field
        self.placeholder = placeholder
        why = "the row is not saved yet" if placeholder == "" else f"{{{placeholder}}} is empty"
        super().__init__(
            f"{model}.{field} has no statechart key: {why}",
            hint="save the row first, or fill the field the key template uses",
        )
