""":class:`MachineLogic`: the functions a chart refers to by name.

Checked when it is built (names are strings, values callables or delays);
:func:`~.build.compile_chart` binds every name the chart uses to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError

from .problems import path_join

__all__ = ["MAX_DELAY_MS", "MachineLogic"]

# delays are whole milliseconds below 2**53 (about 285 000 years): exact as a
# JSON number in every language, and far inside Redis' 64-bit scores and TTLs
MAX_DELAY_MS = 2**53


class MachineLogic:
    """The functions a chart refers to by name.

    ``actions[name](instance, context, event, action)``; ``guards[name](context,
    event)`` or ``(context, event, params)`` when the function takes a third
    positional parameter; ``delays[name]``: milliseconds, or
    ``fn(context, event) -> ms``.
    """

    __slots__ = ("actions", "delays", "guards")

    def __init__(
        self,
        actions: Mapping[str, Callable[..., Any]] | None = None,
        guards: Mapping[str, Callable[..., Any]] | None = None,
        delays: Mapping[str, int | float | Callable[..., Any]] | None = None,
    ) -> None:
        self.actions: dict[str, Callable[..., Any]] = _functions("actions", actions)
        self.guards: dict[str, Callable[..., Any]] = _functions("guards", guards)
        self.delays: dict[str, Any] = {}
        for name, value in (delays or {}).items():
            ok = callable(value) or (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and 0 <= value < MAX_DELAY_MS
            )
            if not isinstance(name, str) or not ok:
                raise InvalidConfigError(
                    f"Delay {brief(name)} must be milliseconds in [0, 2**53) or a function",
                    path=path_join("logic.delays", name),
                    hint="e.g. delays={'TIMEOUT': 5000}",
                )
            self.delays[name] = value

    def __repr__(self) -> str:
        return (
            f"MachineLogic(actions={sorted(self.actions)}, "
            f"guards={sorted(self.guards)}, delays={sorted(self.delays)})"
        )


def _functions(
    kind: str, given: Mapping[str, Callable[..., Any]] | None
) -> dict[str, Callable[..., Any]]:
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise InvalidConfigError(
            f"MachineLogic({kind}=...) must be a dict of name -> function",
            path=f"logic.{kind}",
        )
    out = {}
    for name, fn in given.items():
        if not isinstance(name, str) or not callable(fn):
            raise InvalidConfigError(
                f"{kind[:-1].capitalize()} {brief(name)} must be a callable with a string name",
                path=path_join(f"logic.{kind}", name),
                hint=f"e.g. {kind}={{'name': my_function}}",
            )
        out[name] = fn
    return out
