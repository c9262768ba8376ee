"""Every public django-xsm error, in one place.

All errors derive from :class:`XsmError`, so ``except XsmError`` catches
anything the library raises on purpose. Leaves also inherit the natural
built-in base (``ValueError``, ``LookupError``...) so generic handlers keep
working. Each error carries the facts that caused it as attributes (``key``,
``path``, ``expected``...) and its message names the thing and suggests the
fix.

This module imports nothing from the project or from Django: every layer
(engine, persistence, redis, Django glue) raises these classes.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = [
    "ArgumentTypeError",
    "ConflictError",
    "DataTooDeepError",
    "EventNotAcceptedError",
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
    """Root of every django-xsm error.

    ``message`` is the human text; ``hint`` (may be empty) says how to fix
    it and is appended to ``str(error)``.
    """

    def __init__(self, message: str, *, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)


# --- configuration and events (engine) ---------------------------------------


class InvalidConfigError(XsmError, ValueError):
    """A machine config, a setting or an argument is invalid.

    ``path`` is the JSON path of the offending part of a machine config
    (``"states.cart.on.PAY[0].target"``) or the name of the argument/setting;
    ``problems`` lists every problem found when several were collected at
    once (for example all actions missing from the logic).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        hint: str = "",
        problems: tuple[str, ...] = (),
    ) -> None:
        self.path = path
        self.problems = problems
        text = f"{message} at {path}" if path else message
        super().__init__(text, hint=hint)


class ArgumentTypeError(InvalidConfigError, TypeError):
    """An argument has the wrong type (``actor=None``, ``reason=[]``...).

    An :class:`InvalidConfigError` (so existing handlers keep catching it)
    that is also a ``TypeError``. ``path`` names the argument; ``expected``
    the type it needs. Raised before any I/O: nothing was written.
    """

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
    """A strict send took no transition (unknown event here or guard refused),
    or the event is one no state of the chart can ever take.

    Nothing changed. ``event_type`` is the refused event, ``value`` the state
    value it was refused in, ``key`` the instance key when persisted;
    ``reason`` says why: ``"no-transition"`` (no active state has one for
    the event), ``"guard-refused"`` (``guards`` names the guards that said
    no), ``"done"`` (the instance has finished) or ``"unknown-event"`` (the
    subclass :class:`UnknownEventError`: no state of the chart has one).
    """

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
    """No state of the machine's chart can ever take ``event_type``: no
    exact descriptor names it and no wildcard (``*``, ``order.*``) matches
    it — a typo, most likely. An :class:`EventNotAcceptedError` with
    ``reason == "unknown-event"``.

    Raised by every django-xsm API that sends (``persisted()`` blocks, the
    manager, the model field, ``@stateful_view``, DRF, the admin) before
    any I/O; the engine alone ignores such an event, as XState does.
    ``machine`` is the machine id, ``suggestions`` the closest event types
    of the chart (also in the message), ``key`` the instance key when a
    block refused it; ``value`` is None (the state plays no part).
    """

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
    """An event type in a namespace django-xsm reserves for itself
    (``xstate.*``: timers, done and init events; ``xsm.*``: the outbox's
    ``xsm.outbox.failed``) was sent through a public API. Only django-xsm
    sends them (the timer scanner, the outbox worker); a chart may still
    have transitions on them. Raised before any I/O; nothing was written.

    ``event_type`` is the refused type, ``namespace`` its reserved
    namespace (``"xstate"`` or ``"xsm"``). Tests that must send one on
    purpose use ``block.send_reserved()``.
    """

    def __init__(self, event_type: str, *, namespace: str) -> None:
        self.event_type = event_type
        self.namespace = namespace
        super().__init__(
            f"Event {brief(event_type)} is reserved: {namespace}.* events are sent only by "
            "django-xsm itself (timers, the outbox worker)",
            hint="send an event type of your own; a test that must send it uses "
            "block.send_reserved()",
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
    """``send()`` was called on an engine instance that is still processing
    another event (an action sent to its own instance). Nothing was done."""

    def __init__(self, event_type: str) -> None:
        self.event_type = event_type
        super().__init__(
            f"send({event_type!r}) was called while the instance is still processing another event",
            hint="an action must not send to its own instance; queue an internal "
            "event with {'type': 'xstate.raise', 'event': ...} instead",
        )


class MigrationError(XsmError):
    """A snapshot belongs to another machine version or chart structure and
    no migration turns it into the current one."""

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
    """A commit (or the commit a retry replays) reached the primary, but
    fewer replicas than ``DURABILITY['MIN_REPLICAS']`` acknowledged it
    within ``TIMEOUT_MS``: a failover now could lose it, so it is not
    reported as a success.

    ``required`` and ``acknowledged`` are the replica counts; ``version``
    is the version the commit produced on the primary (0 when unknown).
    Retrying with the same idempotency key is safe either way: if the
    commit survives, the retry replays it (and waits for the replicas
    again); if a failover lost it, the retry applies it once.
    """

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
    """The backing store cannot be reached or refuses writes right now
    (connection refused, timeout, LOADING, READONLY, MASTERDOWN, OOM).

    Nothing was written by the failed call, except where the docs of the
    call say a retry is recognised (commit ids). Safe to retry later;
    ``retry_after_s`` is a suggestion for clients.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        cause: str = "",
        retry_after_s: int = 1,
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
    """The store refused our credentials or permissions (a wrong password,
    a missing ACL permission). Not :class:`StoreUnavailableError`: no retry
    fixes it; the configuration must change. ``cause`` names the reply or
    exception class (``"WRONGPASS"``, ``"NOPERM"``, ``"AuthenticationError"``);
    the message never contains the password or the server's address.
    """

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
    """A compare-and-set on the version failed: someone else committed first,
    or the lock token no longer matches. Nothing was written.

    ``expected`` is the version this writer loaded, ``actual`` the version
    found (``None`` when the instance is gone).
    ``reason`` says which fence failed: ``"version"``, ``"lock"`` (the
    writer does not hold the instance's lock) or ``"claim"`` (an
    idempotency claim it meant to mark was taken over after its lease).
    ``held_lock`` is False for a ``"lock"`` conflict of a writer that never
    held a lock (an optimistic writer meeting another writer's lock).
    ``attempts`` is how many tries ``retry_on_conflict`` made before giving
    up (0 when the error did not come out of a retry helper).
    """

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
        hint = (
            "another writer committed first; reload and retry (see persistence.retry_on_conflict)"
        )
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

    ``encrypted``: the stored value is encrypted (a Fernet token, a sealed
    log field) and the configured codec cannot open it: no codec, or none
    of its keys wrote it. The data is most likely intact, so the hint is
    the keys to configure, never erasing the instance.
    """

    def __init__(
        self, message: str, *, key: str | None = None, hint: str = "", encrypted: bool = False
    ) -> None:
        self.encrypted = encrypted
        if encrypted:
            default = (
                "the data is encrypted and most likely intact: set XSM['CODEC_KEYS'] on "
                "every process to the keys it was written with (newest first; a rotated-out "
                "key back at the end), and do not erase the instance"
            )
        else:
            default = (
                "the stored data is damaged or was written by something else; "
                "look at the raw keys with redis-cli, then erase the instance with "
                "'manage.py xsm_forget KEY' (or restore it from its transition log)"
            )
        super().__init__(message, key=key, hint=hint or default)


class SnapshotTooLargeError(StoreError, ValueError):
    """An encoded snapshot exceeds ``max_snapshot_bytes``; nothing was written.

    ``stored`` tells the two cases apart: False when the snapshot a commit
    would write is too large (what the block's events made of the context:
    the caller's input, over HTTP a 422 ``snapshot-too-large``), True when
    the record already stored is (written under a larger limit: the
    operator's to fix, over HTTP a 500).
    """

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
    """An event payload is larger than ``max_payload_bytes`` (measured as
    the compact JSON the transition log would store). Raised before the
    event runs and before any write: nothing was written. ``size`` and
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
    """A value cannot be stored exactly (a set, an object, NaN, a string
    holding a lone surrogate such as ``"\\ud800"``, an int of more digits
    than Python converts to text...). Raised before any write; ``path``
    names it (``$.context.text``). Both a ``TypeError`` and a
    ``ValueError``, so handlers of either keep catching it."""

    def __init__(self, path: str, problem: str, *, hint: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {problem}", hint=hint)


class DataTooDeepError(UnstorableValueError, InvalidConfigError):
    """Data (a context, a payload, an idempotent result) nested more than
    ``limit`` levels of dicts, lists and tuples: deeper data could not be
    compared, stored or printed without ``RecursionError``. Raised before
    any write; ``path`` names the value that is too deep (``payload``,
    ``context``, ``$.result``).

    An :class:`UnstorableValueError` (over HTTP a 422) and, as before this
    class was public, an :class:`InvalidConfigError`.
    """

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
        super().__init__(
            message,
            hint=hint or "send a key of 1-255 printable ASCII characters, e.g. a UUID",
        )


class IdempotencyInFlightError(XsmError):
    """Another worker holds the claim for this key and has not finished.

    The claim is a lease: it ends at the latest after ``retry_after_s``.
    """

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

    def __init__(
        self,
        key: str,
        *,
        seq: int,
        field: str,
        expected: Any,
        actual: Any,
    ) -> None:
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
    """Code assigned a state to a ``StatechartField`` (``order.status =
    "paid"``). The row's state is a projection of its statechart: it
    changes only through events. Nothing was changed."""

    def __init__(self, model: str, field: str, value: object) -> None:
        self.model = model
        self.field = field
        super().__init__(
            f"{model}.{field} cannot be assigned ({brief(value)}): the state changes only "
            "through events",
            hint=f"send an event instead, e.g. order.{field}.send('PAY')",
        )


class UnsavedInstanceError(XsmError, ValueError):
    """A row has no instance key yet: its primary key (or another field the
    key template uses) is empty. Raised before any Redis I/O."""

    def __init__(self, model: str, field: str, *, placeholder: str = "pk") -> None:
        self.model = model
        self.field = field
        self.placeholder = placeholder
        why = "the row is not saved yet" if placeholder == "" else f"{{{placeholder}}} is empty"
        super().__init__(
            f"{model}.{field} has no statechart key: {why}",
            hint="save the row first, or fill the field the key template uses",
        )


# --- messages ---------------------------------------------------------------------
#
# A value in an error message came from the caller (a config, an event, a
# setting, a snapshot): it may be nested thousands of levels deep, an int of
# 10 000 digits or a ``__repr__`` that raises. ``repr()`` of such a value
# raises RecursionError or ValueError (Python's int-to-str digit limit)
# while the message is being built; :func:`brief` never raises and stays
# short. Every layer prints caller values through it.

_MAX_INT_BITS = 128  # about 39 digits: printed in full up to here
_MAX_BRIEF = 100  # characters of a brief() form, at most


class _Brief(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = 4
        self.maxfrozenset = self.maxdeque = self.maxarray = 4
        self.maxstring = self.maxother = 60
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > _MAX_INT_BITS:
            digits = int(x.bit_length() * 0.30103) + 1
            return f"<int of about {digits} digits>"
        return super().repr_int(x, level)

    def repr_bytes(self, x: bytes, level: int) -> str:
        # reprlib's cut of a str, for bytes: a 10 MB value must not be
        # printed in full before it is cut
        text = repr(x[: self.maxstring])
        if len(text) > self.maxstring:
            i = max(0, (self.maxstring - 3) // 2)
            j = max(0, self.maxstring - 3 - i)
            text = repr(x[:i] + x[len(x) - j :])
            text = text[:i] + "..." + text[len(text) - j :]
        return text

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            return super().repr_instance(x, level)
        except Exception:  # a __repr__ that raises, or recurses without end
            return _opaque(x)


def _opaque(value: object) -> str:
    try:
        return f"<{type(value).__name__} object>"
    except Exception:  # a metaclass whose __name__ raises
        return "<object>"


_BRIEF = _Brief()


def brief(value: object) -> str:
    """A short ``repr``-like form of any value: at most 100 characters, and
    never an exception (an int of 10 000 digits, data nested thousands of
    levels deep, a ``__repr__`` that raises or recurses). Every error
    message that shows a caller's value goes through it."""
    try:
        text = _BRIEF.repr(value)
    except Exception:
        return _opaque(value)
    if len(text) > _MAX_BRIEF:
        return text[: _MAX_BRIEF - 3] + "..."
    return text


def brief_error(exc: BaseException, limit: int = 300) -> str:
    """``"<Class>: <message>"`` of an exception raised by the caller's code
    (a machine module, a migration), at most ``limit`` characters, never an
    exception (a ``__str__`` that raises gives the class alone)."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
