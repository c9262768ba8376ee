"""Reading the live stream in-process, through Django's test clients: the
WSGI handler (``Client``: the sync generator) and the ASGI handler
(``AsyncClient``: the async generator on ``redis.asyncio``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient, Client

from tests.stream.sse import Message, Parser, events

URL = "/_xsm/stream/"


@dataclass
class Outcome:
    status: int
    headers: dict[str, str]
    messages: list[Message] = field(default_factory=list)
    body: bytes = b""
    elapsed: float = 0.0

    @property
    def events(self) -> list[Message]:
        return events(self.messages)

    @property
    def transitions(self) -> list[Message]:
        return [m for m in self.messages if m.event == "transition"]

    def problem(self) -> dict[str, Any]:
        assert self.headers["Content-Type"] == "application/problem+json", self.headers
        data: dict[str, Any] = json.loads(self.body)
        assert data["status"] == self.status
        return data


Until = Callable[[list[Message]], bool]


def never(found: list[Message]) -> bool:
    return False


def transitions(n: int) -> Until:
    return lambda found: sum(m.event == "transition" for m in found) >= n


def sync_stream(
    path: str, headers: dict[str, str], until: Until, during: Callable[[], None] | None, login: Any
) -> Outcome:
    client = Client()
    if login is not None:
        client.force_login(login)
    started = time.monotonic()
    response = client.get(path, headers=headers)
    out = Outcome(response.status_code, dict(response.items()))
    if not response.streaming:
        out.body = response.content
        return out
    parser, worker = Parser(), None
    try:
        for chunk in response.streaming_content:
            out.messages += parser.feed(chunk)
            if during is not None and worker is None:
                worker = threading.Thread(target=during)
                worker.start()
            if until(out.messages):
                break
    finally:
        response.close()
        if worker is not None:
            worker.join()
    out.elapsed = time.monotonic() - started
    return out


async def async_stream(
    path: str, headers: dict[str, str], until: Until, during: Callable[[], None] | None, login: Any
) -> Outcome:
    client = AsyncClient()
    if login is not None:
        await client.aforce_login(login)
    started = time.monotonic()
    response = await client.get(path, headers=headers)
    out = Outcome(response.status_code, dict(response.items()))
    if not response.streaming:
        out.body = response.content
        return out
    parser, worker = Parser(), None
    content = response.streaming_content  # each access makes a new wrapper
    try:
        async for chunk in content:
            out.messages += parser.feed(chunk)
            if during is not None and worker is None:
                worker = threading.Thread(target=during)
                worker.start()
            if until(out.messages):
                break
    finally:
        await content.aclose()
        await sync_to_async(response.close)()  # as Django's ASGI handler does
        if worker is not None:
            worker.join()
    out.elapsed = time.monotonic() - started
    return out


def watch(
    handler: str,
    key: str,
    *,
    until: Until = never,
    during: Callable[[], None] | None = None,
    headers: dict[str, str] | None = None,
    query: str = "",
    login: Any = None,
) -> Outcome:
    """Open ``key``'s stream through the ``"wsgi"`` or the ``"asgi"`` handler,
    read until ``until(messages)`` (or the stream ends), running ``during()``
    in a thread once it opened."""
    path = URL + key + (f"?{query}" if query else "")
    args = (path, headers or {}, until, during, login)
    if handler == "wsgi":
        return sync_stream(*args)
    return async_to_sync(async_stream)(*args)
