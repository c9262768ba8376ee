"""What the Redis backends' generators yield (see :mod:`.core`)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from .calls import Call, Cmd
from .durability import Replicated

__all__ = ["Call", "Cmd", "Many", "Op", "Request"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Many:
    """Several requests sent in one pipeline (one round trip)."""

    requests: tuple[Call | Cmd, ...]


#: What a core generator yields: a script call, a command, a pipeline or a
#: replicated write.
Request: TypeAlias = Call | Cmd | Many | Replicated
Op: TypeAlias = Generator[Request, Any, T]
