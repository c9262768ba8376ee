"""AuditPlugin (the transition log writer), redaction, and replay().

Redaction lives here and only here: the log, ``xsm_inspect`` and the admin
all call :func:`redact`. A field is redacted when its name, lower-cased and
with ``-``/``_`` removed, contains one of the denylist fragments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django_xsm.engine.run.context import MAX_DATA_DEPTH, too_deep
from django_xsm.exceptions import InvalidConfigError, ReplayDivergenceError

from .codecs import to_json_ready
from .records import StoredRecord, TransitionRecord

__all__ = ["DEFAULT_REDACT", "REDACTED", "AuditPlugin", "redact", "replay"]

REDACTED = "[redacted]"

#: Field-name fragments that are never written to the log in clear.
DEFAULT_REDACT: frozenset[str] = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "token",
        "authorization",
        "auth",
        "apikey",
        "privatekey",
        "cookie",
        "session",
        "cardnumber",
        "creditcard",
        "pan",
        "cvv",
        "cvc",
        "iban",
        "ssn",
        "otp",
        "pin",
    }
)


def _normalise(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def _is_sensitive(name: str, fragments: frozenset[str]) -> bool:
    flat = _normalise(name)
    # Short fragments (pan, pin, otp, ssn...) match whole names only, so
    # "company" or "spinner" stay readable; long ones match anywhere.
    return any(f == flat if len(f) <= 4 else f in flat for f in fragments)


def redact(value: Any, fragments: Iterable[str] = DEFAULT_REDACT) -> Any:
    """A copy of ``value`` with sensitive mapping fields replaced by
    ``"[redacted]"``, at any depth (inside lists too)."""
    frozen = (
        fragments
        if isinstance(fragments, frozenset)
        else frozenset(_normalise(f) for f in fragments)
    )
    return _redact(value, frozen, 1)


def _redact(value: Any, frozen: frozenset[str], depth: int) -> Any:
    # Data nested deeper than the engine's cap is refused with its error
    # (DataTooDeepError), never a RecursionError.
    if depth > MAX_DATA_DEPTH and isinstance(value, Mapping | list | tuple):
        raise too_deep("payload")
    if isinstance(value, Mapping):
        return {
            k: REDACTED
            if isinstance(k, str) and _is_sensitive(k, frozen)
            else _redact(v, frozen, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redact(v, frozen, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact(v, frozen, depth + 1) for v in value)
    return value


class AuditPlugin:
    """Record every processed (accepted) event in ``log`` (None: the
    block's store's own, ``store.log``; a log given must share the store's
    commit).

    ``redact``: extra field-name fragments to hide (added to
    :data:`DEFAULT_REDACT`), or a callable ``payload -> payload`` that
    replaces the default redaction entirely.
    """

    def __init__(
        self,
        log: Any = None,
        *,
        redact: Iterable[str] | Callable[[Mapping[str, Any]], Mapping[str, Any]] = (),
    ) -> None:
        self.log = log
        if callable(redact):
            self._redact: Callable[[Mapping[str, Any]], Any] = redact
        else:
            extra = [redact] if isinstance(redact, str) else list(redact)
            fragments = DEFAULT_REDACT | {_normalise(f) for f in extra}
            self._redact = lambda payload: _redact(payload, fragments, 1)

    def log_for(self, store: Any) -> Any:
        """The log a block of ``store`` appends to: ours, else the store's."""
        return self.log if self.log is not None else store.log

    def redact_payload(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The payload as it will be logged: redacted and JSON-ready."""
        cleaned = self._redact(payload)
        if not isinstance(cleaned, Mapping):
            raise InvalidConfigError(
                "AuditPlugin redact() must return a mapping", path="AuditPlugin.redact"
            )
        ready = to_json_ready(dict(cleaned), "$.payload")
        return ready if isinstance(ready, dict) else dict(cleaned)

    def __repr__(self) -> str:
        return f"AuditPlugin(log={self.log!r})"


def _read_all(log: Any, key: str, after_seq: int) -> list[TransitionRecord]:
    records: list[TransitionRecord] = []
    cursor = after_seq
    while True:
        page = log.read(key, after_seq=cursor, limit=500)
        records.extend(page)
        if len(page) < 500:
            return records
        cursor = page[-1].seq


def replay(
    log: Any,
    machine: Any,
    key: str,
    snapshot: StoredRecord | Mapping[str, Any] | None = None,
    *,
    after_seq: int = 0,
    context: Mapping[str, Any] | None = None,
) -> Any:
    """Rebuild an instance by re-sending its logged events; returns it.

    Starts from ``machine.start(context)`` (or from ``snapshot`` plus the
    records after ``after_seq``), drives the clock with each record's
    timestamp, and checks every record: raises
    ``ReplayDivergenceError(field=...)`` when ``from_state``, ``accepted`` or
    ``to_state`` differ, and ``field="seq"`` when the log was trimmed so the
    records needed do not start right after ``after_seq``. Given a
    :class:`StoredRecord`, records its version already contains (an
    ``after_seq`` too small) raise ``field="version"`` instead of being
    applied twice. Redacted payload fields replay as ``"[redacted]"``.
    """
    records = _read_all(log, key, after_seq)
    now = [records[0].timestamp_ms if records else 0]

    def clock() -> int:
        return now[0]

    if snapshot is None:
        instance = machine.start(dict(context) if context is not None else None, clock=clock)
    else:
        data = snapshot.snapshot if isinstance(snapshot, StoredRecord) else snapshot
        instance = machine.restore(data, clock=clock)
    # Records up to this version are in the snapshot already.
    floor = snapshot.version if isinstance(snapshot, StoredRecord) else None
    expected_seq = after_seq + 1
    for record in records:
        if record.seq != expected_seq:
            raise ReplayDivergenceError(
                key, seq=record.seq, field="seq", expected=expected_seq, actual=record.seq
            )
        expected_seq += 1
        now[0] = record.timestamp_ms
        if instance.value != record.from_state:
            raise ReplayDivergenceError(
                key,
                seq=record.seq,
                field="from_state",
                expected=record.from_state,
                actual=instance.value,
            )
        receipt = instance.send(record.event_type, **dict(record.payload))
        # A record of the snapshot's own version that changes the state was
        # produced by the commit that wrote the snapshot (a commit that
        # changes the state bumps the version); an older one, always.
        if floor is not None and (
            record.version < floor or (record.version == floor and receipt.changed)
        ):
            raise ReplayDivergenceError(
                key, seq=record.seq, field="version", expected=floor + 1, actual=record.version
            )
        checks = (
            ("accepted", record.accepted, receipt.accepted),
            ("to_state", record.to_state, instance.value),
        )
        for field, expected, actual in checks:
            if expected != actual:
                raise ReplayDivergenceError(
                    key, seq=record.seq, field=field, expected=expected, actual=actual
                )
    return instance
