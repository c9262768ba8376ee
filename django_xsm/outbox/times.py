"""Times as the outbox shows them: epoch milliseconds and ISO 8601 UTC."""

from __future__ import annotations

import time

__all__ = ["iso", "now_ms"]


def now_ms() -> int:
    """This host's clock in epoch milliseconds (retry times are computed on
    it; the Redis server's clock decides when they are due)."""
    return time.time_ns() // 1_000_000


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC (``2026-11-30T05:43:38.086Z``)."""
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"
