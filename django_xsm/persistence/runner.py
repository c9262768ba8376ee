"""Running logic written once as generators of I/O requests.

A persisted block (:mod:`django_xsm.persistence.block`) and every Redis
operation (:mod:`django_xsm.redis.core`) are generators: they yield what
they need done, receive the reply and return their result. :func:`drive`
runs one with blocking I/O and :func:`adrive` with asyncio; an exception
raised while executing a request is thrown back into the generator at the
point that asked for it, so the logic handles its own failures (release a
claim whose reply was lost).

:class:`Apply` is the request for "call this backend method": a blocking
runner calls it, an asyncio runner awaits it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["Apply", "adrive", "drive"]

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Apply:
    """Call ``method(*args, **kwargs)`` of a backend (awaited when async)."""

    method: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> Any:
        return self.method(*self.args, **self.kwargs)


def drive(op: Generator[R, Any, T], execute: Callable[[R], Any]) -> T:
    """Run ``op`` to its result, executing each request with ``execute``."""
    try:
        request = next(op)
        while True:
            try:
                reply = execute(request)
            except BaseException as exc:
                request = op.throw(exc)
            else:
                request = op.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result


async def adrive(op: Generator[R, Any, T], execute: Callable[[R], Awaitable[Any]]) -> T:
    """:func:`drive` with an awaitable ``execute``."""
    try:
        request = next(op)
        while True:
            try:
                reply = await execute(request)
            except BaseException as exc:
                request = op.throw(exc)
            else:
                request = op.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
