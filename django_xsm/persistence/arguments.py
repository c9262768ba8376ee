"""The argument checks every backend applies, written once: instance keys,
names, limits, durations, wall-clock times, namespace prefixes, and
:class:`StoreKeywords`, the keyword signatures of three ``StateStore``
methods (the contract itself is in :mod:`.base`). Each raises
``InvalidConfigError`` (``ArgumentTypeError`` for a wrong type) before any
I/O, naming the argument."""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Generic, TypeVar

from django_xsm.brief import brief
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError

from . import records

__all__ = [
    "MAX_KEY_LENGTH",
    "MAX_LIMIT",
    "MAX_LOG_MAXLEN",
    "StoreKeywords",
    "check_listing",
    "check_log_read",
    "check_read_last",
    "validate_key",
    "validate_limit",
    "validate_maxlen",
    "validate_positive_int",
    "validate_prefix",
    "validate_seconds",
    "validate_text",
    "validate_ttl_s",
    "wall_to_ms",
]

#: Longest instance key, idempotency key or scope accepted (characters).
MAX_KEY_LENGTH = 512

#: Largest transition-log cap (``maxlen``, ``log_maxlen``, ``XSM['AUDIT']
#: ['MAXLEN']``): Lua reads it as a double, and larger ones stop being the
#: integer ``XADD MAXLEN`` takes.
MAX_LOG_MAXLEN = 10**12


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# A namespace prefix becomes part of a Redis Cluster hash tag and of glob
# patterns, so it is restricted to a conservative alphabet.
_PREFIX = re.compile(r"[A-Za-z0-9_.\-:/]{1,64}")


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
    _require_utf8(value, what, "key")
    return value


def _require_utf8(value: str, name: str, kind: str) -> None:
    # Redis keys, bucket hashes and log lines are UTF-8: a lone surrogate
    # ("\ud800", which json.loads accepts) has no encoding.
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise InvalidConfigError(
                f"{name} {brief(value)} contains a lone surrogate (not valid Unicode text)",
                path=name,
                hint=f"decode the {kind} from valid UTF-8",
            ) from None


def validate_text(value: object, name: str, *, optional: bool = False) -> str | None:
    """``value`` if it is a ``str`` (or None when ``optional``) that UTF-8
    can encode (no lone surrogate such as ``"\\ud800"``: Redis, logs and
    indexes take UTF-8), else :class:`ArgumentTypeError` /
    :class:`InvalidConfigError` naming the argument."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(name, value, expected="a str or None" if optional else "a str")
    _require_utf8(value, name, "text")
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


def validate_maxlen(value: object, name: str) -> int | None:
    """``value`` if it is None or an int from 1 to :data:`MAX_LOG_MAXLEN`
    (a transition log's cap), else InvalidConfigError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LOG_MAXLEN:
        raise InvalidConfigError(
            f"{name} must be an int from 1 to 10**12, or None, got {brief(value)}",
            path=name,
            hint="it caps each instance's log approximately (XADD MAXLEN ~); None keeps all",
        )
    return value


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


#: Seconds either side of the epoch a wall time may be (about 285 000
#: years): its milliseconds stay exact as a double (Redis scores, Lua), and
#: inf, NaN and huge ints are refused instead of failing in a conversion.
_MAX_WALL_S = 2**53 // 1000


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


def _seconds_to_ms(seconds: float) -> int:
    # ``ms / 1000 * 1000`` is not always ``ms`` in binary floating point
    # (1 in ~160 epoch values comes back a hair below), and truncating
    # that would skip a deadline due exactly "now". Within a microsecond of
    # a whole millisecond, take that millisecond; otherwise floor.
    ms = seconds * 1000
    nearest = round(ms)
    return int(nearest) if abs(ms - nearest) < 1e-3 else math.floor(ms)


PageT = TypeVar("PageT")
DueT = TypeVar("DueT")
FlagT = TypeVar("FlagT")


class StoreKeywords(Generic[PageT, DueT, FlagT]):
    """The keyword signatures of ``StateStore.list_page``, ``due_keys`` and
    ``record_timer_failure``, spelled and checked once for every backend.

    A backend subclasses this and implements :meth:`_list_page`,
    :meth:`_due_keys` and :meth:`_record_timer_failure` with positional,
    already checked arguments. ``PageT``, ``DueT`` and ``FlagT`` are what
    those return: ``tuple[list[str], str]``, ``list[tuple[str, int]]`` and
    ``bool`` for a synchronous store, awaitables of them for an asyncio one
    (whose callers then ``await store.list_page(...)`` as usual).
    """

    __slots__ = ()

    def list_page(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int = 50,
        machine: str | None = None,
        state: str | None = None,
    ) -> PageT:
        """See ``StateStore.list_page``; the arguments are checked here."""
        check_listing(prefix, after, limit, machine, state)
        return self._list_page(prefix, after, limit, machine, state)

    def due_keys(
        self, until_wall: float | _dt.datetime, *, limit: int = 100, prefix: str = ""
    ) -> DueT:
        """See ``StateStore.due_keys``; ``prefix`` keeps keys starting with it
        (literally)."""
        until_ms = wall_to_ms(until_wall)
        validate_limit(limit)
        validate_text(prefix, "prefix")
        return self._due_keys(until_ms, limit, prefix)

    def record_timer_failure(
        self,
        key: str,
        *,
        expected_version: int,
        failures: records.TimerFailures,
        next_due_ms: int | None,
    ) -> FlagT:
        """See ``StateStore.record_timer_failure``."""
        return self._record_timer_failure(key, expected_version, failures, next_due_ms)

    def _list_page(
        self, prefix: str, after: str, limit: int, machine: str | None, state: str | None
    ) -> PageT:
        raise NotImplementedError

    def _due_keys(self, until_ms: int, limit: int, prefix: str) -> DueT:
        raise NotImplementedError

    def _record_timer_failure(
        self, key: str, expected: int, failures: records.TimerFailures, due_ms: int | None
    ) -> FlagT:
        raise NotImplementedError
