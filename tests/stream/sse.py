"""Reading ``text/event-stream`` in tests: messages out of a byte stream,
as an EventSource sees them (comments and ``retry:`` kept for the tests)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Message:
    """One block of lines up to a blank line."""

    event: str = ""
    id: str | None = None
    data: str = ""
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def seq(self) -> int:
        assert self.id is not None, self
        return int(self.id)


class Parser:
    """Feed bytes, get the complete messages so far."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Message]:
        self._buffer += chunk
        out: list[Message] = []
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            out.append(parse_block(block.decode("utf-8")))
        return out


def parse_block(block: str) -> Message:
    message = Message()
    data: list[str] = []
    for line in block.split("\n"):
        if line.startswith(":"):
            message.comments.append(line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            message.event = value
        elif name == "id":
            message.id = value
        elif name == "data":
            data.append(value)
        elif name == "retry":
            message.retry = int(value)
    message.data = "\n".join(data)
    return message


def messages(chunks: Iterable[bytes]) -> Iterator[Message]:
    parser = Parser()
    for chunk in chunks:
        yield from parser.feed(chunk)


def events(found: Iterable[Message]) -> list[Message]:
    """The messages an EventSource dispatches (those with data)."""
    return [m for m in found if m.data]
