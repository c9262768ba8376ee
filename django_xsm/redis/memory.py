"""MemoryStore, MemoryInbox, MemoryLog: the Redis backends over an
in-process fakeredis server, for unit tests and scripts with no server.

They are :class:`~django_xsm.redis.RedisStore`, :class:`~django_xsm.redis.RedisInbox`
and :class:`~django_xsm.redis.RedisLog`, so a commit runs the same Lua
scripts (fakeredis runs them through lupa): there is one implementation of
the commit semantics. Each one built with no argument gets a server of its
own and shares nothing; pass another to share its server (and so commit
atomically with it)::

    store = MemoryStore()
    inbox, log = MemoryInbox(store), MemoryLog(store)

The embedded default of the Django app (``XSM['EMBEDDED']``) builds its
clients here too. Needs the ``embedded`` extra (fakeredis and lupa).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError
from django_xsm.persistence.base import Codec

from .inbox import RedisInbox
from .log import RedisLog
from .store import DEFAULT_MAX_SNAPSHOT_BYTES, RedisStore

__all__ = [
    "PREFIX",
    "MemoryInbox",
    "MemoryLog",
    "MemoryStore",
    "fakeredis_client",
    "missing_packages",
    "new_server",
]

#: The namespace of every in-process store, inbox and log.
PREFIX = "memory"


def missing_packages() -> list[str]:
    """Which of fakeredis and lupa (fakeredis' Lua) are not installed."""
    return [m for m in ("fakeredis", "lupa") if importlib.util.find_spec(m) is None]


def new_server() -> Any:
    """A new, empty in-process fakeredis server (``fakeredis.FakeServer``)."""
    missing = missing_packages()
    if missing:
        raise InvalidConfigError(
            f"The in-process store needs {' and '.join(missing)}",
            path="server",
            hint='pip install "django-xsm[embedded]"',
        )
    import fakeredis

    return fakeredis.FakeServer()


def fakeredis_client(server: Any, *, is_async: bool = False) -> Any:
    """A sync or asyncio fakeredis client on ``server`` (from :func:`new_server`)."""
    import fakeredis

    if is_async:
        return fakeredis.FakeAsyncRedis(server=server)
    return fakeredis.FakeRedis(server=server)


def _codec(share: object) -> Codec | None:
    """The codec of a shared :class:`MemoryStore` (its inbox and log seal
    what they store with it), else None."""
    return share.codec if isinstance(share, MemoryStore) else None


def _client(share: object) -> Any:
    """The client of ``share`` (an in-process store, inbox or log), or one
    on a new server when it is None."""
    if share is None:
        return fakeredis_client(new_server())
    if isinstance(share, MemoryStore | MemoryInbox | MemoryLog):
        return share.client
    raise ArgumentTypeError(
        "server", share, expected="a MemoryStore, MemoryInbox or MemoryLog to share, or None"
    )


class MemoryStore(RedisStore):
    """A :class:`~django_xsm.redis.RedisStore` on an in-process fakeredis.

    ``server``: a MemoryStore, MemoryInbox or MemoryLog whose server to
    share (None: a new one); ``log`` is the same for a MemoryLog (the
    store's ``forget()`` erases its records). Its parts ``inbox``, ``log``
    and ``outbox`` are on its server (``log_maxlen`` caps the log).
    ``clock`` (epoch ms) is the clock blocks arm deadlines and stamp log
    records with; leases, locks, idempotency receipts and ``ttl_s`` expire
    on the server's clock (wall time), as on Redis. Other arguments as for
    RedisStore.
    """

    def __init__(
        self,
        server: MemoryStore | MemoryInbox | MemoryLog | None = None,
        *,
        codec: Codec | None = None,
        max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES,
        ttl_s: float | None = None,
        lock_ttl_ms: int = 30_000,
        clock: Callable[[], int] | None = None,
        log: MemoryLog | None = None,
        log_maxlen: int | None = None,
    ) -> None:
        if server is not None and log is not None and server.client is not log.client:
            raise InvalidConfigError(
                "server and log are on different in-process servers", path="log"
            )
        super().__init__(
            _client(server if server is not None else log),
            prefix=PREFIX,
            codec=codec,
            max_snapshot_bytes=max_snapshot_bytes,
            ttl_s=ttl_s,
            lock_ttl_ms=lock_ttl_ms,
            log_maxlen=log_maxlen,
        )
        if clock is not None:
            self.clock = clock

    def _attach_parts(self, buckets: int | None, log_maxlen: int | None) -> None:
        super()._attach_parts(buckets, log_maxlen)
        # the in-process classes, on this store's server, prefix and codec
        self.inbox, self.log = MemoryInbox(self), MemoryLog(self, maxlen=log_maxlen)


class MemoryInbox(RedisInbox):
    """A :class:`~django_xsm.redis.RedisInbox` on an in-process fakeredis;
    ``server`` as for :class:`MemoryStore` (built on a store, it seals
    stored receipts with the store's codec)."""

    def __init__(self, server: MemoryStore | MemoryInbox | MemoryLog | None = None) -> None:
        super().__init__(_client(server), prefix=PREFIX, codec=_codec(server))


class MemoryLog(RedisLog):
    """A :class:`~django_xsm.redis.RedisLog` on an in-process fakeredis;
    ``server`` as for :class:`MemoryStore` (built on a store, it seals
    payloads with the store's codec), ``maxlen`` as for RedisLog."""

    def __init__(
        self,
        server: MemoryStore | MemoryInbox | MemoryLog | None = None,
        *,
        maxlen: int | None = None,
    ) -> None:
        super().__init__(_client(server), prefix=PREFIX, maxlen=maxlen, codec=_codec(server))
