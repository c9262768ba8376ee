"""The handlers of ``XSM['OUTBOX']['HANDLERS']``, imported once, and which
one an event type goes to.

A handler is any callable ``handler(event, *, delivery)`` (docs/outbox.md,
Handlers and patterns): returning means delivered, raising means failed.
Paths are imported when the table is built, so a typo stops the worker at
start-up (``manage.py check``: ``xsm.E014``) instead of dead-lettering
every event it would have taken. Every message names the setting.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_xsm import conf
from django_xsm.conf.outbox import pattern_problem
from django_xsm.persistence.outbox import Delivery

from .patterns import most_specific, specificity

__all__ = ["Handler", "HandlerTable", "Route", "get_handlers", "handler_problems", "reset"]


class Handler(Protocol):
    """What a handler is: called with the event and, by keyword, its delivery."""

    def __call__(self, event: dict[str, Any], /, *, delivery: Delivery) -> object: ...


@dataclass(frozen=True, slots=True)
class Route:
    """One entry of the table: the ``pattern``, where its handler came from
    (``path``: the dotted path, or the callable's qualified name) and the
    ``handler`` itself."""

    pattern: str
    path: str
    handler: Handler


def _setting(pattern: str) -> str:
    return f"XSM['OUTBOX']['HANDLERS'][{pattern[:60]!r}]"


def _takes_delivery(found: Callable[..., Any]) -> bool:
    """False only when the signature is known and refuses ``(event, delivery=...)``."""
    try:
        signature = inspect.signature(found)
    except (TypeError, ValueError):  # builtins, some C callables: trust them
        return True
    try:
        signature.bind({}, delivery=None)
    except TypeError:
        return False
    return True


def load_handler(pattern: str, target: str | Callable[..., Any]) -> Route:
    """The route of one ``HANDLERS`` entry; ``ImproperlyConfigured`` naming
    the setting when the pattern is invalid, the path does not import, or
    what it names is not a handler."""
    where = _setting(pattern)
    why = pattern_problem(pattern)
    if why is not None:
        raise ImproperlyConfigured(f"{where}: {why}")
    if callable(target):
        found: Any = target
        path = getattr(target, "__qualname__", type(target).__name__)
    else:
        path = target
        try:
            found = import_string(path)
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"{where}: cannot import {path[:200]!r}: {str(exc)[:300]} (give the dotted "
                "path 'package.module.function' of an importable handler)"
            ) from exc
        except Exception as exc:  # the module raised while importing, or "a..b"
            raise ImproperlyConfigured(
                f"{where}: importing {path[:200]!r} raised {type(exc).__name__}: "
                f"{str(exc)[:300]} (fix that module, or point at another handler)"
            ) from exc
        if not callable(found):
            raise ImproperlyConfigured(
                f"{where}: {path[:200]!r} is a {type(found).__name__}, not callable (point at "
                "a function handler(event, *, delivery), or at forwarder(...)'s result)"
            )
    if not _takes_delivery(found):
        raise ImproperlyConfigured(
            f"{where}: {path[:200]!r} cannot be called as handler(event, delivery=...) "
            "(define it as def handler(event, *, delivery): ...)"
        )
    return Route(pattern, path, found)


def handler_problems(handlers: Mapping[str, str]) -> list[str]:
    """Every entry of ``handlers`` that would not load, as messages (for
    the system check; the table raises at the first one)."""
    problems = []
    for pattern, target in handlers.items():
        try:
            load_handler(pattern, target)
        except ImproperlyConfigured as exc:
            problems.append(str(exc))
    return problems


class HandlerTable:
    """Patterns and their handlers; :meth:`route` picks the one for an event
    type (:mod:`.patterns`: exact, then the longest prefix, then ``*``).

    Built from the settings by :func:`get_handlers`, or directly from a
    mapping of pattern to dotted path or callable (tests, custom workers).
    """

    def __init__(self, handlers: Mapping[str, str | Callable[..., Any]]) -> None:
        self.routes: dict[str, Route] = {
            pattern: load_handler(pattern, target) for pattern, target in handlers.items()
        }
        self._chosen: dict[str, Route | None] = {}
        self._lock = threading.Lock()

    def route(self, event_type: str) -> Route | None:
        """The route of ``event_type``, or None when no pattern takes it."""
        try:
            return self._chosen[event_type]
        except KeyError:
            pass
        pattern = most_specific(self.routes, event_type)
        found = None if pattern is None else self.routes[pattern]
        with self._lock:
            if len(self._chosen) < 10_000:  # types are few; never grow without bound
                self._chosen[event_type] = found
        return found

    def patterns(self) -> list[str]:
        """The patterns, most specific first."""
        return sorted(self.routes, key=specificity, reverse=True)

    def __iter__(self) -> Iterator[Route]:
        return iter([self.routes[p] for p in self.patterns()])

    def __len__(self) -> int:
        return len(self.routes)

    def __repr__(self) -> str:
        return f"<HandlerTable {', '.join(self.patterns()) or 'empty'}>"


_table: HandlerTable | None = None
_table_lock = threading.Lock()


def get_handlers() -> HandlerTable:
    """The table of ``XSM['OUTBOX']['HANDLERS']`` (imported once per
    settings; ``ImproperlyConfigured`` for the first entry that does not
    load)."""
    global _table
    found = _table
    if found is not None:
        return found
    with _table_lock:
        if _table is None:
            _table = HandlerTable(conf.get_settings().outbox.handlers)
        return _table


def reset() -> None:
    """Forget the imported handlers (rebuilt on next use)."""
    global _table
    with _table_lock:
        _table = None


conf.on_reset(reset)
