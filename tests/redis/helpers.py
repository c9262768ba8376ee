"""Helpers for the Redis tests: namespace snapshots, raw script calls,
and what a blocking client sends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from redis.connection import AbstractConnection

from django_xsm.redis import escape_glob, scripts
from django_xsm.redis.client import SHAS, SOURCES
from django_xsm.redis.keys import KeyLayout
from tests.support import entry, snap, unit  # noqa: F401  (re-exported to the Redis tests)


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


def layout_of(store: Any) -> KeyLayout:
    """The namespace layout of a blocking store (reading the schema marker
    now if nothing did yet: construction does no I/O)."""
    layout = store.layout
    if layout is None:
        layout = store.driver.run(store.core.state.ensure())
    assert layout is not None, "the schema marker was not read"
    return layout  # type: ignore[no-any-return]


_SCRIPT_OF = {**{sha: name for name, sha in SHAS.items()}, **{s: n for n, s in SOURCES.items()}}


def _text(arg: Any) -> str:
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)


@dataclass
class Sent:
    """What blocking clients sent: one list of commands per round trip,
    each command as text with a script call named after its script."""

    trips: list[list[list[str]]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [c[0] for trip in self.trips for c in trip]

    def commands(self, name: str) -> list[list[str]]:
        return [c for trip in self.trips for c in trip if c[0] == name]


def _command(args: tuple[Any, ...]) -> list[str]:
    words = [_text(a) for a in args]
    if words and words[0].upper() in ("EVALSHA", "EVAL"):
        return [_SCRIPT_OF.get(words[1], words[0].upper()), *words[2:]]
    return [words[0].upper(), *words[1:]] if words else []


@contextlib.contextmanager
def sent(client: Any) -> Iterator[Sent]:
    """Count the round trips (and their commands) blocking redis-py
    connections send while active, on fakeredis and on a real server: a
    command-counting connection, so nothing is reset on a shared server.
    Scripts are loaded first, so no NOSCRIPT retry shows up."""
    for source in SOURCES.values():
        client.script_load(source)
    record, pending = Sent(), []
    real_send = AbstractConnection.send_packed_command
    real_command = AbstractConnection.send_command
    real_pack = AbstractConnection.pack_commands

    def send_packed_command(self: Any, command: Any, check_health: bool = True) -> Any:
        record.trips.append([_command(args) for args in pending])
        pending.clear()
        return real_send(self, command, check_health)

    def send_command(self: Any, *args: Any, **kwargs: Any) -> Any:
        pending[:] = [args]
        return real_command(self, *args, **kwargs)

    def pack_commands(self: Any, commands: Any) -> Any:
        pending[:] = [tuple(c) for c in commands]
        return real_pack(self, pending)

    patch = pytest.MonkeyPatch()
    patch.setattr(AbstractConnection, "send_packed_command", send_packed_command)
    patch.setattr(AbstractConnection, "send_command", send_command)
    patch.setattr(AbstractConnection, "pack_commands", pack_commands)
    try:
        yield record
    finally:
        patch.undo()


def stored_value(client: Any, name: str, field: str) -> bytes | None:
    """Field ``field`` of the snapshot hash ``name``, whole or in its parts
    (layout 2 keeps long values as ``<field>1..<field>n``)."""
    from django_xsm.redis.calls import join_long

    return join_long(client.hgetall(name), field.encode())


def drop_value(client: Any, name: str, field: str) -> None:
    """Remove field ``field`` of the snapshot hash ``name`` in every form."""
    from django_xsm.redis.keys import LONG_PARTS

    client.hdel(name, field, field + "n", *(f"{field}{i}" for i in range(1, LONG_PARTS + 1)))


def norm(value: Any) -> Any:
    """A result without what legitimately differs between two runs (clocks)."""
    kind = type(value).__name__
    if kind == "StoredRecord":
        return _record(value)
    if kind == "CommitResult":
        return (value.version, value.first_seq, value.replayed)
    if kind == "OpenResult":
        return (
            _record(value.record),
            value.floor,
            value.locked,
            value.lock_busy_ms > 0,
            [_claim(c) for c in value.claims],
        )
    if kind == "ClaimOutcome":
        return _claim(value)
    if kind == "TransitionRecord":
        return value.to_dict()
    if isinstance(value, dict) and "expires_ms" in value:
        return {k: v for k, v in value.items() if k != "expires_ms"}
    if isinstance(value, list | tuple):
        return [norm(v) for v in value]
    return value


def _record(r: Any) -> Any:
    if r is None:
        return None
    return (dict(r.snapshot), r.version, r.machine_version, r.machine_id, dict(r.timer_failures))


def _claim(c: Any) -> Any:
    return (c.status, c.receipt, c.retry_after_ms > 0)
