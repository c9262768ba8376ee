"""The bounded form of a caller's value in messages: :func:`brief`.

A value in an error message came from the caller (a config, an event, a
setting, a snapshot): it may be nested thousands of levels deep, an int of
10 000 digits or a ``__repr__`` that raises. ``repr()`` of such a value
raises RecursionError or ValueError (Python's int-to-str digit limit)
while the message is being built; :func:`brief` never raises and stays
short. Every layer prints caller values through it, so this module imports
nothing of the project or of Django. :mod:`django_xsm.exceptions` re-exports
both functions.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["brief", "brief_error"]

_MAX_INT_BITS = 128  # about 39 digits: printed in full up to here
_MAX_BRIEF = 100  # characters of a brief() form, at most


class _Brief(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = 4
        self.maxfrozenset = self.maxdeque = self.maxarray = 4
        self.maxstring = self.maxother = 60
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > _MAX_INT_BITS:
            digits = int(x.bit_length() * 0.30103) + 1
            return f"<int of about {digits} digits>"
        return super().repr_int(x, level)

    def repr_bytes(self, x: bytes, level: int) -> str:
        # reprlib's cut of a str, for bytes: a 10 MB value must not be
        # printed in full before it is cut
        text = repr(x[: self.maxstring])
        if len(text) > self.maxstring:
            i = max(0, (self.maxstring - 3) // 2)
            j = max(0, self.maxstring - 3 - i)
            text = repr(x[:i] + x[len(x) - j :])
            text = text[:i] + "..." + text[len(text) - j :]
        return text

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            return super().repr_instance(x, level)
        except Exception:  # a __repr__ that raises, or recurses without end
            return _opaque(x)


def _opaque(value: object) -> str:
    try:
        return f"<{type(value).__name__} object>"
    except Exception:  # a metaclass whose __name__ raises
        return "<object>"


_BRIEF = _Brief()


def brief(value: object) -> str:
    """A short ``repr``-like form of any value: at most 100 characters, and
    never an exception (an int of 10 000 digits, data nested thousands of
    levels deep, a ``__repr__`` that raises or recurses). Every error
    message that shows a caller's value goes through it."""
    try:
        text = _BRIEF.repr(value)
    except Exception:
        return _opaque(value)
    if len(text) > _MAX_BRIEF:
        return text[: _MAX_BRIEF - 3] + "..."
    return text


def brief_error(exc: BaseException, limit: int = 300) -> str:
    """``"<Class>: <message>"`` of an exception raised by the caller's code
    (a machine module, a migration), at most ``limit`` characters, never an
    exception (a ``__str__`` that raises gives the class alone)."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
