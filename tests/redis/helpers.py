"""Helpers for the Redis tests: namespace snapshots, raw script calls."""

from __future__ import annotations

import uuid
from typing import Any

from django_xsm.persistence.records import CommitUnit, LogEntry
from django_xsm.redis import escape_glob, scripts
from django_xsm.redis.keys import KeyLayout
from tests.support import order_machine


def namespace_keys(client: Any, prefix: str) -> list[bytes]:
    """Every key of ``prefix`` (test-only SCAN; the library never scans)."""
    out: set[bytes] = set()
    for pattern in (f"{{{escape_glob(prefix)}}}*", f"{{{escape_glob(prefix)}:*"):
        out.update(client.scan_iter(match=pattern, count=500))
    return sorted(out)


def key_state(client: Any, key: bytes | str) -> tuple[Any, ...]:
    """Type, full content and whether a TTL is set, for one key."""
    kind = client.type(key)
    kind = kind.decode() if isinstance(kind, bytes) else kind
    if kind == "hash":
        content: Any = sorted(client.hgetall(key).items())
    elif kind == "zset":
        content = client.zrange(key, 0, -1, withscores=True)
    elif kind == "stream":
        content = [(i, sorted(f.items())) for i, f in client.xrange(key)]
        info = client.xinfo_stream(key)
        content = (content, info["last-generated-id"], info["length"])
    elif kind == "string":
        content = client.get(key)
    elif kind == "set":
        content = sorted(client.smembers(key))
    elif kind == "list":
        content = client.lrange(key, 0, -1)
    else:
        content = None
    return kind, content, client.pttl(key) > 0


def namespace_state(client: Any, prefix: str) -> dict[bytes, tuple[Any, ...]]:
    """The whole namespace, comparable with ``==`` (byte-identical content)."""
    return {k: key_state(client, k) for k in namespace_keys(client, prefix)}


def raw_script(client: Any, name: str) -> Any:
    """The script ``name`` of :mod:`django_xsm.redis.scripts`, registered on
    ``client`` so it can be called with ``(keys=, args=)``."""
    return client.register_script(getattr(scripts, name))


def snap(**context: Any) -> dict[str, Any]:
    return order_machine().start(context or None).snapshot()


def unit(key: str, expected: int, snapshot: Any = None, **kw: Any) -> CommitUnit:
    kw.setdefault("machine_id", "order")
    kw.setdefault("machine_version", "")
    return CommitUnit(
        key=key,
        commit_id=kw.pop("commit_id", uuid.uuid4().hex),
        expected_version=expected,
        snapshot=snapshot,
        **kw,
    )


def entry(event: str = "ADD", ts: int = 1_800_000_000_000, **kw: Any) -> LogEntry:
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


def layout_of(store: Any) -> KeyLayout:
    layout = store.layout
    assert layout is not None, "the schema marker was not read"
    return layout  # type: ignore[no-any-return]
