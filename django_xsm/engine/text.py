"""``brief(value)``: the bounded form every engine error message prints.

A value in an error message came from the caller (a config, an event, a
snapshot): it may be nested thousands of levels deep, an int of 10 000
digits or a ``__repr__`` that raises. ``repr()`` of such a value raises
``RecursionError`` or ``ValueError`` (Python's int-to-str digit limit) while
the message is being built; :func:`brief` never raises and stays short.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["brief"]

_MAX_INT_BITS = 128  # about 39 digits: printed in full up to here


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

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            return super().repr_instance(x, level)
        except Exception:  # a __repr__ that raises, or recurses without end
            return f"<{type(x).__name__} object>"


_BRIEF = _Brief()


def brief(value: object) -> str:
    """A short ``repr``-like form of any value (at most about 80 characters,
    never an exception)."""
    try:
        return _BRIEF.repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"
