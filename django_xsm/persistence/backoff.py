"""Retry delays: exponential backoff with full jitter, for timers and the outbox.

Attempt ``n`` (counting from 1) waits a random time between 0 and
``min(cap, base * 2 ** (n - 1))`` (1 s, 2 s, 4 s ... 256 s, then 300 s
with the defaults); the randomness spreads the retries of failures that
started together instead of sending them back in one wave.
https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """``base_s`` and ``cap_s`` in seconds; ``jitter=False`` waits the
    ceiling itself (deterministic, for tests and for callers that want
    it); ``rng`` is the random source (seed one for reproducible runs)."""

    base_s: float = 1.0
    cap_s: float = 300.0
    jitter: bool = True
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("base_s", "cap_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise InvalidConfigError(
                    f"{name} must be a finite number of seconds >= 0, got {brief(value)}", path=name
                )
        if self.cap_s < self.base_s:
            raise InvalidConfigError(
                f"cap_s ({self.cap_s}) is below base_s ({self.base_s})",
                path="cap_s",
                hint="the cap bounds the doubling delays; make it at least the base",
            )

    def ceiling_ms(self, attempt: int) -> int:
        """The longest wait after failed attempt ``attempt`` (>= 1)."""
        exponent = min(max(attempt, 1) - 1, 64)  # 2**64 s is far past any cap
        return int(min(self.cap_s, self.base_s * 2.0**exponent) * 1000)

    def delay_ms(self, attempt: int) -> int:
        """How long to wait after failed attempt ``attempt``."""
        ceiling = self.ceiling_ms(attempt)
        return self.rng.randint(0, ceiling) if self.jitter else ceiling
