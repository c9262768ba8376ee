"""How long a failed delivery waits, and what its error says.

The wait is full jitter below a doubling ceiling, the timers' formula
(:class:`~django_xsm.persistence.backoff.Backoff`; docs/outbox.md, Retries
and dead letters). Errors are stored with the entry and sent to the
instance in the compensation event, so they are redacted like the
transition log (the built-in denylist plus ``AUDIT['REDACT']``): sensitive
``name=value`` / ``"name": value`` pairs and the values of the event's
sensitive fields become ``[redacted]``, then the text is cut to
:data:`MAX_ERROR` characters.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from django_xsm.persistence.audit import DEFAULT_REDACT, REDACTED, redact
from django_xsm.persistence.backoff import Backoff

__all__ = ["MAX_ERROR", "RetryPolicy", "clean_text", "describe_error", "redact_text"]

#: The longest error text kept (characters); the store caps it at 2000.
MAX_ERROR = 1000
#: Secrets shorter than this are not searched for in messages: "1" or "ok"
#: would garble every message and hide nothing.
_MIN_SECRET = 4
_PAIR = re.compile(
    r"""(?P<q>['"]?)(?P<name>[A-Za-z_][\w\-]{0,63})(?P=q)(?P<sep>\s*[:=]\s*)"""
    r"""(?P<value>'[^']*'|"[^"]*"|[^\s,;&)}\]]+)"""
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``MAX_ATTEMPTS`` of ``XSM['OUTBOX']`` and the :class:`Backoff` built
    from its ``BACKOFF_S`` and ``MAX_BACKOFF_S``."""

    max_attempts: int = 10
    backoff: Backoff = field(default_factory=Backoff)

    @classmethod
    def of(
        cls,
        max_attempts: int,
        backoff_s: float,
        max_backoff_s: float,
        rng: random.Random | None = None,
    ) -> RetryPolicy:
        """The policy of those settings; ``rng`` is the random source (a
        seeded ``random.Random`` in tests)."""
        return cls(max_attempts, Backoff(backoff_s, max_backoff_s, True, rng or random.Random()))

    def ceiling_ms(self, attempt: int) -> int:
        """The longest wait after failed attempt ``attempt`` (1-based)."""
        return self.backoff.ceiling_ms(attempt)

    def delay_ms(self, attempt: int) -> int:
        """The wait after failed attempt ``attempt``: full jitter below the ceiling."""
        return self.backoff.delay_ms(attempt)

    def exhausted(self, attempt: int) -> bool:
        """True when attempt ``attempt`` was the last one allowed."""
        return attempt >= self.max_attempts


def _sensitive(name: str, fragments: tuple[str, ...]) -> bool:
    return bool(redact({name: 0}, fragments)[name] == REDACTED)


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def _secrets(plain: Any, cleaned: Any) -> Iterator[str]:
    """The values ``redact()`` hid: where ``cleaned`` says [redacted] and
    ``plain`` did not."""
    if isinstance(plain, Mapping) and isinstance(cleaned, Mapping):
        for k, v in plain.items():
            hidden = cleaned.get(k)
            if hidden == REDACTED and v != REDACTED:
                yield from _leaves(v)
            else:
                yield from _secrets(v, hidden)
    elif isinstance(plain, list | tuple) and isinstance(cleaned, list | tuple):
        for v, hidden in zip(plain, cleaned, strict=False):
            yield from _secrets(v, hidden)


def redact_text(text: str, event: Mapping[str, Any] | None, extra: Iterable[str] = ()) -> str:
    """``text`` with the sensitive values of ``event`` and sensitive
    ``name=value`` pairs replaced by ``[redacted]``."""
    fragments = (*DEFAULT_REDACT, *extra)

    def pair(match: re.Match[str]) -> str:
        value = match["value"]
        if not _sensitive(match["name"], fragments) or value.strip("'\"").startswith("[redacted"):
            return match[0]
        quote = value[0] if value[0] in "'\"" else ""
        return f"{match['q']}{match['name']}{match['q']}{match['sep']}{quote}{REDACTED}{quote}"

    text = _PAIR.sub(pair, text)
    if event:
        try:
            found = set(_secrets(event, redact(event, fragments)))
        except ValueError:  # nested past the engine's depth cap: nothing to compare
            found = set()
        for secret in sorted(found, key=len, reverse=True):
            if len(secret) >= _MIN_SECRET:
                text = text.replace(secret, REDACTED)
    return text


def describe_error(
    exc: BaseException,
    event: Mapping[str, Any] | None = None,
    *,
    redact_fragments: Iterable[str] = (),
    limit: int = MAX_ERROR,
) -> str:
    """``"ValueError: the message"``, redacted (see the module docstring),
    one line, at most ``limit`` characters, always storable (no lone
    surrogates)."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return clean_text(redact_text(text, event, redact_fragments), limit)


def clean_text(text: str, limit: int = MAX_ERROR) -> str:
    """One storable line of at most ``limit`` characters."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = _CONTROL.sub(" ", text).replace("\n", " ").replace("\r", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
