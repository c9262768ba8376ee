"""Shared test helpers: machines, backends on every store, a fake clock.

Backends come in three flavours selected by name: ``memory``
(``MemoryStore``, ``MemoryInbox`` and ``MemoryLog``: the Redis backends on
an in-process fakeredis, built as a user builds them), ``fakeredis``
(redis-py against an in-process server running our Lua through lupa) and
``live`` (a real redis-server at ``XSM_REDIS_URL``; tests using it skip
cleanly without the variable).
Live tests use a fresh prefix per test and delete exactly their keys.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine

LIVE_URL = os.environ.get("XSM_REDIS_URL", "")
live_only = pytest.mark.skipif(not LIVE_URL, reason="XSM_REDIS_URL is not set")

ORDER_CHART: dict[str, Any] = {
    "id": "order",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {"on": {"ADD": {"actions": "add"}, "PAY": "paid", "NOOP": {}}},
        "paid": {"on": {"SHIP": "shipped"}},
        "shipped": {"type": "final"},
    },
}

TIMER_CHART: dict[str, Any] = {
    "id": "timer",
    "initial": "waiting",
    "context": {"fired": 0},
    "states": {
        "waiting": {
            "after": {"1000": {"target": "expired", "actions": "count"}},
            "on": {"POKE": {"target": "waiting", "reenter": True}, "CANCEL": "cancelled"},
        },
        "expired": {"on": {"RESTART": "waiting"}},
        "cancelled": {},
    },
}


def _add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["items"] += int(event.get("n", 1)) if hasattr(event, "get") else 1


def _count(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["fired"] += 1


def order_machine(**logic: Any) -> Any:
    actions = {"add": _add, **logic.pop("actions", {})}
    return create_machine(ORDER_CHART, logic=MachineLogic(actions=actions, **logic))


def timer_machine(count: Callable[..., None] = _count) -> Any:
    return create_machine(TIMER_CHART, logic=MachineLogic(actions={"count": count}))


class FakeClock:
    """Epoch-ms clock that only moves when told to."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class Backends:
    """A store, an inbox and a log that share one namespace."""

    name: str
    store: Any
    inbox: Any
    log: Any
    # Let ``ms`` of the backend's own expiry clock pass (fake clock or wait).
    pass_time: Callable[[int], None]
    client: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def memory_backends(**store_kwargs: Any) -> Backends:
    """MemoryStore, MemoryInbox and MemoryLog on one in-process server."""
    from django_xsm.persistence import MemoryInbox, MemoryLog, MemoryStore

    maxlen = store_kwargs.pop("maxlen", None)
    store = MemoryStore(**store_kwargs)
    return Backends(
        "memory",
        store,
        MemoryInbox(store),
        MemoryLog(store, maxlen=maxlen),
        _sleep_ms,
        client=store.client,
    )


def _sleep_ms(ms: int) -> None:
    time.sleep(ms / 1000 + 0.03)


def redis_backends(client: Any, prefix: str, **store_kwargs: Any) -> Backends:
    """A RedisStore and its own inbox and log (``store.inbox``,
    ``store.log``): the memory flavour builds its inbox and log itself, so
    the suite runs both ways of getting them."""
    from django_xsm.redis import RedisStore

    maxlen = store_kwargs.pop("maxlen", None)
    buckets = store_kwargs.pop("buckets", 4)
    store = RedisStore(client, prefix=prefix, buckets=buckets, log_maxlen=maxlen, **store_kwargs)
    return Backends("redis", store, store.inbox, store.log, _sleep_ms, client=client)


def fakeredis_client() -> Any:
    import fakeredis

    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


def delete_namespace(client: Any, prefix: str) -> None:
    """Delete every key of ``prefix`` (``{prefix}`` and ``{prefix:*}`` tags)."""
    from django_xsm.redis import escape_glob

    for pattern in (f"{{{escape_glob(prefix)}}}*", f"{{{escape_glob(prefix)}:*"):
        batch = list(client.scan_iter(match=pattern, count=500))
        if batch:
            client.delete(*batch)


@dataclass
class BackendFactory:
    """Builds backends of one flavour; cleans up live namespaces."""

    flavour: str
    made: list[tuple[Any, str]] = field(default_factory=list)

    def __call__(self, **store_kwargs: Any) -> Backends:
        if self.flavour == "memory":
            return memory_backends(**store_kwargs)
        if self.flavour == "fakeredis":
            return redis_backends(fakeredis_client(), unique_prefix(), **store_kwargs)
        import redis

        client = redis.Redis.from_url(LIVE_URL)
        prefix = unique_prefix()
        self.made.append((client, prefix))
        return redis_backends(client, prefix, **store_kwargs)

    def cleanup(self) -> None:
        for client, prefix in self.made:
            delete_namespace(client, prefix)


def backend_factory(flavour: str) -> Iterator[BackendFactory]:
    if flavour == "live" and not LIVE_URL:
        pytest.skip("XSM_REDIS_URL is not set")
    factory = BackendFactory(flavour)
    try:
        yield factory
    finally:
        factory.cleanup()


# --- record builders shared by the contract and the Redis tests -------------


def snap(**context: Any) -> dict[str, Any]:
    """A fresh order snapshot, with ``context`` when given."""
    return order_machine().start(context or None).snapshot()


def unit(key: str, expected: int, snapshot: Any = None, **kw: Any) -> Any:
    """A CommitUnit for ``key`` at ``expected`` (machine 'order', fresh id)."""
    from django_xsm.persistence.records import CommitUnit

    kw.setdefault("machine_id", "order")
    kw.setdefault("machine_version", "")
    return CommitUnit(
        key=key,
        commit_id=kw.pop("commit_id", uuid.uuid4().hex),
        expected_version=expected,
        snapshot=snapshot,
        **kw,
    )


def entry(event: str = "ADD", ts: int = 1_800_000_000_000, **kw: Any) -> Any:
    """A LogEntry of an order event (fields overridable)."""
    from django_xsm.persistence.records import LogEntry

    fields: dict[str, Any] = {
        "event_type": event,
        "payload": {"n": 1},
        "actor": "alice",
        "reason": "",
        "from_state": "cart",
        "to_state": "cart",
        "idempotency_key": "",
        "correlation_id": "c-1",
        "timestamp_ms": ts,
    }
    fields.update(kw)
    return LogEntry(**fields)


# --- counting round trips ------------------------------------------------------


class RoundTrips:
    """Counts packets sent to Redis: one per command, one per pipeline."""

    def __init__(self) -> None:
        self.count = 0
        self.enabled = False

    def __enter__(self) -> RoundTrips:
        self.count = 0
        self.enabled = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.enabled = False


def count_round_trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    """``with count_round_trips(monkeypatch) as rt: ...; rt.count`` — every
    Redis round trip of sync and asyncio clients (fakeredis connections
    subclass redis-py's, so this counts them too)."""
    import redis
    import redis.asyncio.connection
    import redis.connection

    counter = RoundTrips()
    sync_send = redis.connection.AbstractConnection.send_packed_command
    async_send = redis.asyncio.connection.AbstractConnection.send_packed_command

    def counting_send(self: Any, command: Any, check_health: bool = True) -> Any:
        if counter.enabled:
            counter.count += 1
        return sync_send(self, command, check_health)

    async def counting_asend(self: Any, command: Any, check_health: bool = True) -> Any:
        if counter.enabled:
            counter.count += 1
        return await async_send(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting_send)
    monkeypatch.setattr(
        redis.asyncio.connection.AbstractConnection, "send_packed_command", counting_asend
    )
    return counter
