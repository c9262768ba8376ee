"""Live transitions: ``GET /_xsm/stream/<key>`` as server-sent events.

Every commit writes its transition records into the instance's log (a Redis
Stream, inside the commit script), so a reader blocked on that stream
(``XREAD BLOCK``, :meth:`django_xsm.redis.RedisLog.wait`) wakes for a commit
made by any process on any host that shares the Redis. One SSE message per
record::

    id: 7
    event: transition
    data: {"key": "order:42", "seq": 7, "version": 7, "event_type": "PAY", ...}

``data`` is :meth:`TransitionRecord.to_dict` as JSON (the payload already
redacted). A client that reconnects with ``Last-Event-ID: <seq>`` (an
``EventSource`` does) or ``?after=<seq>`` gets every record after that seq,
in order, once, then the live ones; when some of them were trimmed away
(``MAXLEN``, ``xsm_purge_logs``) one ``event: gap`` message names the first
seq still there before the stream goes on. A comment line goes out at least
every ``XSM['STREAM']['HEARTBEAT_S']``; a stream ends after ``MAX_SECONDS``
(the client reconnects and resumes) or when Redis fails (a warning is
logged, no traceback).

One view serves both servers: under ASGI the stream is an async generator
on ``redis.asyncio`` (no thread per connection): the streams of one
instance in a process share one feed, a blocking ``XREAD`` on its log that
hands each record to all of them (docs/live.md says why per instance, not
one reader for the whole process); under WSGI a sync generator holds its
worker thread and reads for itself. Each process keeps at
most ``MAX_CONNECTIONS`` streams open (503 + ``Retry-After`` beyond).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.http import require_GET

from django_xsm import backend, conf, http
from django_xsm.backend import clients
from django_xsm.exceptions import InstanceNotFoundError, XsmError
from django_xsm.fields.events import may_send
from django_xsm.models import PERM_VIEW
from django_xsm.persistence.arguments import validate_key
from django_xsm.persistence.records import TransitionRecord
from django_xsm.redis import AsyncRedisLog, AsyncRedisStore, RedisLog
from django_xsm.redis.log import MAX_SEQ
from django_xsm.registry import VIEW, machines

__all__ = [
    "BATCH",
    "RETRY_AFTER_S",
    "RETRY_MS",
    "open_streams",
    "staff_may_view",
    "stream",
]

logger = logging.getLogger("django_xsm.stream")

#: Records sent per read of the log (a client far behind catches up in
#: batches of this size).
BATCH = 100
#: The reconnection delay a stream asks of its client (the SSE ``retry:``
#: field, ms), and the longer one after Redis failed.
RETRY_MS = 1000
UNAVAILABLE_RETRY_MS = 5000
#: Retry-After of the 503 a process answers when its streams are all taken.
RETRY_AFTER_S = 5
#: How many records an asyncio stream may have waiting before it reads the
#: log itself instead (a client slower than its instance's commits).
INBOX_LIMIT = 1000
#: How long one read of a feed may wait (the log cuts it to half the
#: client's socket timeout).
FEED_WAIT_S = 60.0

_CURSOR = re.compile(r"[0-9]{1,19}")


def staff_may_view(request: HttpRequest, key: str) -> bool:
    """The default ``XSM['STREAM']['PERMISSION']``: an active, authenticated
    staff user with ``django_xsm.view_instance`` (who may open the admin's
    instance pages) may follow an instance its machine's ``PERMISSIONS``
    under ``"xsm.view"`` let them follow (``may_send`` with event_type
    None, target the key; no such rules: any instance)."""
    user = getattr(request, "user", None)
    if not (
        user is not None
        and user.is_authenticated
        and user.is_active
        and user.is_staff
        and user.has_perm(PERM_VIEW)
    ):
        return False
    if not any(VIEW in entry.permissions for entry in machines.values()):
        return True  # no rule to ask: no Redis read
    machine_id = backend.get_store().machine_ids([key]).get(key)
    entry = machines.get(machines.name_for_machine_id(machine_id, "")) if machine_id else None
    return entry is None or may_send(entry, None, user, key)  # no instance: the 404 follows


@functools.lru_cache(maxsize=8)
def _permission(path: str) -> Callable[[HttpRequest, str], bool]:
    try:
        found = import_string(path)
    except (ImportError, ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            f"XSM['STREAM']['PERMISSION']: cannot import {path[:200]!r} "
            "(manage.py check reports it as xsm.E010)"
        ) from exc
    if not callable(found):
        raise ImproperlyConfigured(f"XSM['STREAM']['PERMISSION']: {path!r} is not callable")
    return found  # type: ignore[no-any-return]


# --- the logs streams read: clients of their own ------------------------------------------


#: Connections a stream client's pool may open beyond MAX_CONNECTIONS (the
#: catch-up reads of streams that join a feed).
POOL_SPARE = 16

_sync_log: tuple[Any, RedisLog] | None = None
_async_logs: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[Any, AsyncRedisLog, AsyncRedisStore]
] = weakref.WeakKeyDictionary()


def _roomy(client: Any, streams: int) -> Any:
    """``client`` with a pool that holds a connection per open stream
    (redis-py 6+ caps a pool at 100 unless told otherwise; a cluster
    client's per-node pools follow ``REDIS_OPTIONS``, docs/live.md)."""
    pool = getattr(client, "connection_pool", None)
    wanted = streams + POOL_SPARE
    if pool is not None and isinstance(getattr(pool, "max_connections", None), int):
        pool.max_connections = max(pool.max_connections, wanted)
    return client


def _log_sync(s: conf.XsmSettings) -> RedisLog:
    """The process's log for streams: its own client, so blocking reads
    never hold the connections requests use."""
    global _sync_log
    with _lock:
        if _sync_log is None:
            client = _roomy(backend.new_client(is_async=False), s.stream.max_connections)
            assert s.prefix is not None  # new_client() refused a missing prefix
            codec = backend.get_codec()
            _sync_log = (
                client,
                RedisLog(client, prefix=s.prefix, buckets=s.buckets, codec=codec),
            )
        return _sync_log[1]


def _log_async(s: conf.XsmSettings) -> tuple[AsyncRedisLog, AsyncRedisStore]:
    """The same for the running event loop (closed with it), and a store on
    that client for the checks of a stream that opens (a burst of opening
    streams must not drain the pool requests use either)."""
    loop = asyncio.get_running_loop()
    found = _async_logs.get(loop)
    if found is None:
        client = _roomy(backend.new_client(is_async=True), s.stream.max_connections)
        assert s.prefix is not None
        codec = backend.get_codec()
        log = AsyncRedisLog(client, prefix=s.prefix, buckets=s.buckets, codec=codec)
        store = AsyncRedisStore(client, prefix=s.prefix, buckets=s.buckets, codec=codec)
        found = _async_logs[loop] = (clients.tie_to_loop(client), log, store)
    return found[1], found[2]


@conf.on_reset
def _forget_logs() -> None:
    global _sync_log
    with _lock:
        old, _sync_log = _sync_log, None
        _async_logs.clear()  # each closes with its loop
    if old is not None:
        old[0].close()


# --- the per-process bound -------------------------------------------------------------


class _Slot:
    """One open stream of this process, given back once (``release``)."""

    __slots__ = ("_released",)

    def __init__(self) -> None:
        self._released = False

    def release(self) -> None:
        global _open
        with _lock:
            if not self._released:
                self._released = True
                _open -= 1


_lock = threading.Lock()
_open = 0


def _take_slot(limit: int) -> _Slot | None:
    global _open
    with _lock:
        if _open >= limit:
            return None
        _open += 1
    return _Slot()


def open_streams() -> int:
    """How many live streams this process holds open now."""
    return _open


class _EventStream(StreamingHttpResponse):
    """``text/event-stream`` that gives its slot back when the server closes
    it (every WSGI and ASGI server calls ``close()``, also after a client
    went away mid-stream)."""

    def __init__(
        self,
        content: Iterator[bytes] | AsyncIterator[bytes],
        slot: _Slot,
        closing: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(content, content_type="text/event-stream; charset=utf-8")
        self._slot = slot
        self._closing = closing
        self["Cache-Control"] = "no-cache, no-transform"
        self["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._slot.release()
            if self._closing is not None:
                self._closing()


# --- what goes on the wire (no I/O) ------------------------------------------------------


def _message(event: str, data: dict[str, Any], seq: int | None = None) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event}\ndata: {text}\n\n"


@dataclass(slots=True)
class _Follower:
    """What one stream sends, decided without I/O; the sync and the async
    loop only read the log for it.

    ``read_from`` is the seq the next read starts after; ``cursor`` the seq
    the client holds (the last one sent, or the one it resumed from). When
    ``check`` is on, a record that does not follow ``cursor`` is announced
    by a ``gap`` message first (its predecessors were trimmed away, or the
    client's seq is ahead of the log: an instance forgotten and created
    again).
    """

    key: str
    read_from: int
    cursor: int
    check: bool
    heartbeat_s: float
    ends_at: float | None
    last_write: float

    def opening(self) -> bytes:
        return f"retry: {RETRY_MS}\n: following {json.dumps(self.key)}\n\n".encode()

    def timeout(self, now: float) -> float | None:
        """How long the next read may wait; None once the stream is over."""
        if self.ends_at is not None and now >= self.ends_at:
            return None
        wait = self.last_write + self.heartbeat_s - now
        if self.ends_at is not None:
            wait = min(wait, self.ends_at - now)
        return max(wait, 0.0)

    def frames(self, records: list[TransitionRecord], now: float) -> bytes:
        """The messages for ``records``, or a heartbeat when nothing came
        for ``heartbeat_s``; b"" when nothing is due."""
        out: list[str] = []
        for record in records:
            if record.seq <= self.read_from:
                continue  # sent already (a shared feed hands on what it read)
            if self.check and record.seq != self.cursor + 1:
                gap = {"key": self.key, "after": self.cursor, "first_seq": record.seq}
                out.append(_message("gap", gap))
            self.check = True
            out.append(_message("transition", record.to_dict(), record.seq))
            self.cursor = self.read_from = record.seq
        if not out and now - self.last_write >= self.heartbeat_s:
            out.append(": keep-alive\n\n")
        if out:
            self.last_write = now
        return "".join(out).encode()

    def failed(self, exc: XsmError) -> bytes:
        """Redis failed: say so in the log (one line), ask the client to
        come back a little later, and end."""
        logger.warning("The live stream of %r ended: %s", self.key, exc.message)
        return f"retry: {UNAVAILABLE_RETRY_MS}\n: the store is unavailable\n\n".encode()


def _follow_sync(follower: _Follower) -> Iterator[bytes]:
    try:
        log = _log_sync(conf.get_settings())
    except XsmError as exc:
        yield follower.failed(exc)
        return
    yield follower.opening()
    try:
        while (timeout := follower.timeout(time.monotonic())) is not None:
            found = log.wait(
                follower.key, after_seq=follower.read_from, timeout_s=timeout, limit=BATCH
            )
            chunk = follower.frames(found, time.monotonic())
            if chunk:
                yield chunk
    except XsmError as exc:
        yield follower.failed(exc)


class _Inbox:
    """What a feed hands one asyncio stream: records, or the error that
    ended the feed. A stream whose client reads slower than its instance
    commits overflows at INBOX_LIMIT records: the inbox is emptied and the
    stream reads the log itself until it caught up."""

    __slots__ = ("error", "overflowed", "ready", "records")

    def __init__(self) -> None:
        self.records: list[TransitionRecord] = []
        self.error: XsmError | None = None
        self.overflowed = False
        self.ready = asyncio.Event()

    def put(self, records: list[TransitionRecord]) -> None:
        if len(self.records) + len(records) > INBOX_LIMIT:
            self.records.clear()
            self.overflowed = True
        else:
            self.records.extend(records)
        self.ready.set()

    def fail(self, exc: XsmError) -> None:
        self.error = exc
        self.ready.set()

    async def take(self, timeout: float) -> list[TransitionRecord]:
        """The records put since the last take, waiting at most ``timeout``
        for some; raises the feed's error."""
        if not self.ready.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready.wait(), timeout)
        self.ready.clear()
        if self.error is not None:
            raise self.error
        found, self.records = self.records, []
        return found


class _Feed:
    """One blocking ``XREAD`` loop per followed instance and event loop:
    every asyncio stream of that instance in the process gets its records
    from it (a commit costs one read however many follow it;
    docs/live.md). It ends with its last stream."""

    def __init__(self, log: AsyncRedisLog, key: str, cursor: int) -> None:
        self.log, self.key, self.cursor = log, key, cursor
        self.inboxes: set[_Inbox] = set()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        try:
            while self.inboxes:
                found = await self.log.wait(
                    self.key, after_seq=self.cursor, timeout_s=FEED_WAIT_S, limit=BATCH
                )
                if found:
                    self.cursor = found[-1].seq
                    for inbox in list(self.inboxes):
                        inbox.put(found)
        except XsmError as exc:
            for inbox in list(self.inboxes):
                inbox.fail(exc)
        finally:
            feeds = _feeds.get(asyncio.get_running_loop(), {})
            if feeds.get(self.key) is self:
                del feeds[self.key]


_feeds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Feed]] = (
    weakref.WeakKeyDictionary()
)


def _join(log: AsyncRedisLog, key: str, cursor: int, inbox: _Inbox) -> _Feed:
    """The running feed of ``key`` (or a new one reading after ``cursor``),
    with ``inbox`` subscribed."""
    feeds = _feeds.setdefault(asyncio.get_running_loop(), {})
    feed = feeds.get(key)
    if (
        feed is None
        or feed.log is not log
        or feed.task is None
        or feed.task.done()
        or not feed.inboxes
    ):
        feed = feeds[key] = _Feed(log, key, cursor)
        feed.inboxes.add(inbox)
        feed.task = asyncio.get_running_loop().create_task(feed.run())
    else:
        feed.inboxes.add(inbox)
    return feed


def _leave(feed: _Feed, inbox: _Inbox) -> None:
    """Unsubscribe ``inbox``; the last one out ends the feed (and a stream
    that opens next starts a new one)."""
    feed.inboxes.discard(inbox)
    if not feed.inboxes and feed.task is not None:
        feeds = _feeds.get(asyncio.get_running_loop(), {})
        if feeds.get(feed.key) is feed:
            del feeds[feed.key]
        feed.task.cancel()  # its XREAD too: the connection is dropped, not reused


async def _catch_up(follower: _Follower, log: AsyncRedisLog, until: int) -> AsyncIterator[bytes]:
    """What the feed will not hand on: the records after the follower's
    seq up to ``until`` (where the feed stood when it joined), read here."""
    while follower.read_from < until:
        found = await log.read(follower.key, after_seq=follower.read_from, limit=BATCH)
        if not found:
            return
        chunk = follower.frames(found, time.monotonic())
        if chunk:
            yield chunk


def _leave_from(loop: asyncio.AbstractEventLoop, feed: _Feed, inbox: _Inbox) -> Callable[[], None]:
    """``_leave`` for ``close()``, which ASGI servers call from a thread."""

    def leave() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: so is the feed
            loop.call_soon_threadsafe(_leave, feed, inbox)

    return leave


async def _follow_async(
    follower: _Follower, log: AsyncRedisLog, feed: _Feed, inbox: _Inbox
) -> AsyncIterator[bytes]:
    try:
        yield follower.opening()
        async for chunk in _catch_up(follower, log, feed.cursor):
            yield chunk
        while (timeout := follower.timeout(time.monotonic())) is not None:
            found = await inbox.take(timeout)
            if inbox.overflowed:
                inbox.overflowed = False
                async for chunk in _catch_up(follower, log, feed.cursor):
                    yield chunk
            chunk = follower.frames(found, time.monotonic())
            if chunk:
                yield chunk
    except XsmError as exc:
        yield follower.failed(exc)
    finally:
        _leave(feed, inbox)


# --- the view ------------------------------------------------------------------------------


def _cursor(request: HttpRequest) -> int | None:
    """The seq the client resumes after: ``Last-Event-ID`` (what an
    EventSource sends when it reconnects, so it wins), else ``?after=``;
    None for neither. ValueError when it is not a seq."""
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or ""
    raw = raw.strip()
    if not raw:
        return None
    if not _CURSOR.fullmatch(raw) or int(raw) > MAX_SEQ:
        raise ValueError(raw)
    return int(raw)


def _failure(exc: XsmError, request: HttpRequest) -> HttpResponseBase:
    response = http.error_response(exc, request)
    if response is None:  # an unmapped error under DEBUG: the debug page
        raise exc
    return response


@require_GET
async def stream(request: HttpRequest, key: str) -> HttpResponseBase:
    """``GET /_xsm/stream/<key>``: the instance's transitions as they are
    committed (see the module docstring; docs/live.md)."""
    s = conf.get_settings()
    try:
        validate_key(key)
    except XsmError as exc:
        return http.invalid_key_response(request, exc.message)
    try:
        after = _cursor(request)
    except ValueError:
        return http.documented_problem(
            request,
            "invalid-cursor",
            f"Last-Event-ID / ?after= must be a seq from 0 to {MAX_SEQ}",
        )
    if not s.audit.enabled:
        return http.documented_problem(
            request,
            "audit-disabled",
            "The live stream sends the transition log, and XSM['AUDIT']['ENABLED'] is False",
        )
    try:
        allowed = await sync_to_async(_permission(s.stream.permission))(request, key)
    except XsmError as exc:  # Redis, read by the default permission
        return _failure(exc, request)
    if not allowed:
        return http.documented_problem(
            request, "forbidden", "You may not follow this instance's transitions"
        )
    slot = _take_slot(s.stream.max_connections)
    if slot is None:
        return http.documented_problem(
            request,
            "too-many-streams",
            f"This process has {s.stream.max_connections} live streams open",
            retry_after=RETRY_AFTER_S,
        )
    try:
        return await _start(request, s, key, after, slot)
    except XsmError as exc:
        slot.release()
        return _failure(exc, request)
    except BaseException:
        slot.release()
        raise


async def _start(
    request: HttpRequest, s: conf.XsmSettings, key: str, after: int | None, slot: _Slot
) -> HttpResponseBase:
    """The stream of ``key`` once it may open: the instance exists, where
    to start is known, the response owns ``slot``."""
    log, store = _log_async(s)
    if not (await store.machine_ids([key])).get(key):
        raise InstanceNotFoundError(key)
    last = await log.last_seq(key)
    now = time.monotonic()
    follower = _Follower(
        key=key,
        # No seq: the records committed from now on. A seq past the log's
        # last one (an instance forgotten and created again, or a made-up
        # id): everything the log holds, after a gap message.
        read_from=last if after is None else (after if after <= last else 0),
        cursor=last if after is None else after,
        check=after is not None,
        heartbeat_s=s.stream.heartbeat_s,
        ends_at=None if s.stream.max_seconds is None else now + s.stream.max_seconds,
        last_write=now,
    )
    if isinstance(request, ASGIRequest):
        inbox = _Inbox()
        feed = _join(log, key, follower.read_from, inbox)
        leave = _leave_from(asyncio.get_running_loop(), feed, inbox)
        return _EventStream(_follow_async(follower, log, feed, inbox), slot, leave)
    return _EventStream(_follow_sync(follower), slot)
