"""What the current request tells the blocks opened while it runs.

``XsmMiddleware`` sets :data:`request_correlation_id` for the request's
duration; a block opened without a ``correlation_id`` of its own (through
``machines[...].objects``, the model field, a webhook handler) takes it, so
its transition-log records carry the request's id as ``@stateful_view``
blocks do. Outside a request it is ``""``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["correlation_scope", "request_correlation_id"]

request_correlation_id: ContextVar[str] = ContextVar("xsm_request_correlation_id", default="")


@contextlib.contextmanager
def correlation_scope(correlation_id: str) -> Iterator[None]:
    """Make ``correlation_id`` the default of blocks opened inside."""
    token = request_correlation_id.set(correlation_id)
    try:
        yield
    finally:
        request_correlation_id.reset(token)
