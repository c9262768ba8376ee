"""The building blocks of ``XSM`` validation: collecting problems, naming a
setting, and checking one value (strings, numbers, choices, dicts).

They live apart from :mod:`.validation` (which assembles ``XsmSettings``)
and :mod:`.topology` (REDIS_CLUSTER, SENTINEL, DURABILITY) so both use
the same words: every message starts with the setting's path
(``XSM['AUDIT']['MAXLEN']``), and values are shown bounded
(:func:`django_xsm.exceptions.brief`), never in full.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm.brief import brief

__all__ = [
    "MAX_NUMBER",
    "Problems",
    "a_type",
    "check_keys",
    "choice",
    "fail",
    "mapping",
    "number",
    "opt_str",
    "setting_name",
]

#: The largest number any XSM setting takes (seconds, milliseconds, bytes,
#: counts): beyond it a value is a typo, and would overflow float() or a
#: Redis integer.
MAX_NUMBER = 10**12


class Problems:
    """Collects every problem of one ``parse()``: validation goes on after
    the first, so a user fixes them all in one round."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def take(
        self, build: Callable[..., Any], *args: Any, default: Any = None, **options: Any
    ) -> Any:
        """``build(*args, **options)``, or ``default`` after recording the
        ``ImproperlyConfigured`` it raised."""
        try:
            return build(*args, **options)
        except ImproperlyConfigured as exc:
            self.found.append(str(exc))
            return default

    def report(self, message: str, *parts: str | int, hint: str = "") -> None:
        """Record the problem ``message`` of the setting at ``parts`` (see :func:`fail`)."""
        self.found.append(str(fail(message, *parts, hint=hint)))


def setting_name(*parts: str | int) -> str:
    """``XSM['A']['B'][0]`` for the path ``("A", "B", 0)``."""
    return "XSM" + "".join(f"[{p!r}]" for p in parts)


def fail(message: str, *parts: str | int, hint: str = "") -> ImproperlyConfigured:
    """The error for the setting at ``parts``: its path, the problem, the fix."""
    text = f"{setting_name(*parts)}: {message}"
    return ImproperlyConfigured(f"{text} ({hint})" if hint else text)


def check_keys(
    given: Mapping[Any, Any],
    allowed: Mapping[str, Any],
    *parts: str,
    into: Problems,
    removed: Mapping[str, str] | None = None,
) -> None:
    """Record every key of ``given`` that ``allowed`` lacks: a ``removed``
    one with what to do instead, any other with the key probably meant (a
    typo) or the list of known keys."""
    for key in given:
        if key in allowed:
            continue
        if removed and isinstance(key, str) and key in removed:
            into.found.append(f"Removed setting {setting_name(*parts, key)}: {removed[key]}")
            continue
        # a key may be any hashable: a tuple 3000 levels deep, an int of
        # 5000 digits; str() of those raises, brief() never does
        text = key[:60] if isinstance(key, str) else brief(key)
        where = setting_name(*parts, text)
        close = difflib.get_close_matches(text.upper(), list(allowed), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(allowed)}"
        into.found.append(f"Unknown setting {where} ({hint})")


def a_type(value: Any) -> str:
    """``a str``, ``an int``: what a secret setting got, without its value."""
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiouAEIOU" else f"a {name}"


def opt_str(value: Any, *parts: str, secret: bool = False) -> str | None:
    """None, or a non-empty string. ``secret``: the value may hold a
    password, so a message names its type, not the value."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        got = a_type(value) if secret and value != "" else brief(value)
        raise fail(f"expected a non-empty string or None, got {got}", *parts)
    return value


def number(
    value: Any,
    *parts: str,
    optional: bool = False,
    integer: bool = False,
    minimum: float = 0,
    maximum: float = MAX_NUMBER,
    hint: str = "",
) -> Any:
    """A finite number (an int when ``integer``) in ``[minimum, maximum]``;
    bools are refused (``True`` is not 1 second)."""
    if value is None and optional:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if (
        isinstance(value, bool)
        or not ok
        or (isinstance(value, float) and not math.isfinite(value))  # NaN passed "< minimum"
        or not minimum <= value <= maximum
    ):
        what = "an int" if integer else "a number"
        top = f"{maximum:.0e}" if maximum >= 10**6 else f"{maximum:g}"
        raise fail(
            f"expected {what} from {minimum:g} to {top}"
            f"{' or None' if optional else ''}, got {brief(value)}",
            *parts,
            hint=hint,
        )
    return value


def choice(value: Any, allowed: tuple[Any, ...], *parts: str) -> Any:
    """One of ``allowed`` exactly (``1`` is not ``True``)."""
    if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
        wanted = ", ".join(repr(a) for a in allowed)
        raise fail(f"expected one of {wanted}, got {brief(value)}", *parts)
    return value


def mapping(value: Any, what: str, *parts: str, hint: str = "") -> dict[str, Any]:
    """A copy of a dict setting (its values are not shown on error: they
    may hold passwords)."""
    if not isinstance(value, Mapping):
        raise fail(f"expected {what}, got {type(value).__name__}", *parts, hint=hint)
    return dict(value)
