"""What the current request tells the blocks opened while it runs.

``XsmMiddleware`` sets the request's correlation id and actor for the
request's duration; a block opened without a ``correlation_id`` or an
``actor`` of its own (through ``machines[...].objects``, the model field, a
webhook handler) takes them, so its transition-log records carry the
request's id and user as ``@stateful_view`` blocks do. Outside a request
both are ``""``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["request_actor", "request_correlation_id", "request_scope"]

request_correlation_id: ContextVar[str] = ContextVar("xsm_request_correlation_id", default="")
# A callable: the actor is resolved lazily (request.user is a database
# lookup), and only when a block needs it.
_request_actor: ContextVar[Callable[[], str] | None] = ContextVar("xsm_request_actor", default=None)


def request_actor() -> str:
    """The current request's actor, or ``""`` outside a request."""
    found = _request_actor.get()
    return found() if found is not None else ""


@contextlib.contextmanager
def request_scope(correlation_id: str, actor: Callable[[], str]) -> Iterator[None]:
    """Make the request's correlation id and actor the defaults of the
    blocks opened inside."""
    tokens = (request_correlation_id.set(correlation_id), _request_actor.set(actor))
    try:
        yield
    finally:
        _request_actor.reset(tokens[1])
        request_correlation_id.reset(tokens[0])
