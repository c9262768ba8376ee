"""The block calls the observer hooks phase / on_lock_busy / on_replay
around its own steps, only on plugins that override them, and never lets a
hook's error change what a block does."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.exceptions import LockTimeoutError, StoreUnavailableError
from django_xsm.persistence import (
    IdempotencyPlugin,
    MemoryInbox,
    MemoryStore,
    PersistedInstance,
    PessimisticLock,
    Plugin,
    apersisted,
    persisted,
)
from django_xsm.persistence.block import (
    add_process_plugin,
    process_plugins,
    remove_process_plugin,
)
from django_xsm.persistence.block.instance import overriding
from django_xsm.redis import AsyncRedisInbox, AsyncRedisStore

fakeredis = pytest.importorskip("fakeredis")


def _add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["items"] += 1


def _boom(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    raise RuntimeError("boom")


MACHINE = create_machine(
    {
        "id": "order",
        "initial": "cart",
        "context": {"items": 0},
        "states": {"cart": {"on": {"ADD": {"actions": "add"}, "BOOM": {"actions": "boom"}}}},
    },
    logic=MachineLogic(actions={"add": _add, "boom": _boom}),
)


class Recorder(Plugin):
    """Writes down every hook call, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @contextlib.contextmanager
    def phase(self, block: PersistedInstance, name: str, event_type: str) -> Iterator[None]:
        self.calls.append(f"enter {name} {event_type}".strip())
        try:
            yield
        except BaseException as exc:
            self.calls.append(f"exit {name} {type(exc).__name__}")
            raise
        self.calls.append(f"exit {name}")

    def on_load(self, block: PersistedInstance, record: Any) -> None:
        self.calls.append("on_load")

    def before_send(self, block: PersistedInstance, event_type: str, payload: Any) -> None:
        self.calls.append(f"before_send {event_type}")

    def after_send(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        self.calls.append(f"after_send {event_type}")

    def after_commit(self, block: PersistedInstance, result: Any) -> None:
        self.calls.append(f"after_commit v{result.version}")

    def on_lock_busy(self, block: PersistedInstance, busy_ms: int) -> None:
        self.calls.append("on_lock_busy")

    def on_replay(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        self.calls.append(f"on_replay {event_type}")


#: What a Recorder sees of a block that sends ADD once and commits version 1.
ONE_SEND = [
    "enter open",
    "on_load",
    "exit open",
    "enter send ADD",
    "before_send ADD",
    "after_send ADD",
    "exit send",
    "enter commit",
    "after_commit v1",
    "exit commit",
]


def test_the_phases_wrap_the_block_hooks_in_order() -> None:
    rec = Recorder()
    with persisted(MemoryStore(), "order:1", MACHINE, plugins=[rec]) as order:
        order.send("ADD")
    assert rec.calls == ONE_SEND


def test_a_failed_body_has_no_commit_phase_and_errors_reach_the_phase() -> None:
    rec = Recorder()
    with pytest.raises(RuntimeError):
        with persisted(MemoryStore(), "order:1", MACHINE, plugins=[rec]) as order:
            order.send("BOOM")
    assert rec.calls[-3:] == ["enter send BOOM", "before_send BOOM", "exit send RuntimeError"]

    class Down(MemoryStore):
        def open_op(self, *args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailableError("Redis did not answer (ConnectionError)")

    rec = Recorder()
    with pytest.raises(StoreUnavailableError):
        with persisted(Down(), "order:1", MACHINE, plugins=[rec]):
            pass
    assert rec.calls == ["enter open", "exit open StoreUnavailableError"]


def test_busy_locks_and_replays_reach_their_hooks() -> None:
    store = MemoryStore()
    inbox = MemoryInbox(store)
    rec = Recorder()
    with persisted(store, "order:1", MACHINE, lock=PessimisticLock(timeout=5)):
        with pytest.raises(LockTimeoutError):
            with persisted(
                store, "order:1", MACHINE, plugins=[rec], lock=PessimisticLock(timeout=0.03)
            ):
                pass
    assert "on_lock_busy" in rec.calls and rec.calls[-1] == "exit open LockTimeoutError"
    rec = Recorder()
    plugins = [IdempotencyPlugin(inbox), rec]
    for _ in range(2):
        with persisted(store, "order:2", MACHINE, plugins=plugins) as order:
            order.send("ADD", idempotency_key="e1")
    assert rec.calls.count("on_replay ADD") == 1
    assert rec.calls.count("after_send ADD") == 1  # the replay ran nothing


def test_only_plugins_that_override_a_hook_are_asked() -> None:
    class Loader(Plugin):
        def on_load(self, block: PersistedInstance, record: Any) -> None:
            pass

    rec, loader = Recorder(), Loader()
    assert overriding([loader, rec], "phase") == (rec,)
    assert overriding([loader, rec], "on_replay") == (rec,)
    with persisted(MemoryStore(), "order:1", MACHINE, plugins=[loader]) as order:
        assert Plugin().phase(order, "send", "ADD").__enter__() is None  # the null default
        order.send("ADD")
    rec = Recorder()
    with persisted(MemoryStore(), "order:1", MACHINE, plugins=[rec]) as order:
        op = order.close_op(failed=False)
        op.close()  # abandoned before it started: no phase entered
        assert "enter commit" not in rec.calls
        order.closed = False


async def test_an_async_block_runs_the_same_phases() -> None:
    client = fakeredis.FakeAsyncRedis()
    store = AsyncRedisStore(client, prefix="hooks")
    inbox = AsyncRedisInbox(client, prefix="hooks")
    rec = Recorder()
    plugins = [IdempotencyPlugin(inbox), rec]
    for _ in range(2):
        async with apersisted(store, "order:1", MACHINE, plugins=plugins) as order:
            await order.asend("ADD", idempotency_key="e1")
    assert rec.calls[:10] == ONE_SEND
    assert rec.calls[10:] == [
        "enter open",
        "on_load",
        "exit open",
        "enter send ADD",
        "on_replay ADD",
        "exit send",
        "enter commit",
        "exit commit",
    ]
    rec.calls.clear()
    with pytest.raises(RuntimeError, match="boom"):
        async with apersisted(store, "order:1", MACHINE, plugins=plugins) as order:
            order.send("BOOM")
    assert rec.calls[-1] == "exit send RuntimeError" and "enter commit" not in rec.calls


class Broken(Plugin):
    """Every observer hook raises; the phase also tries to swallow errors."""

    def __init__(self, where: str) -> None:
        self.where = where

    @contextlib.contextmanager
    def phase(self, block: PersistedInstance, name: str, event_type: str) -> Iterator[None]:
        if self.where == "enter":
            raise RuntimeError("broken enter")
        try:
            yield
        except Exception:
            return  # tries to suppress the block's error
        if self.where == "exit":
            raise RuntimeError("broken exit")

    def on_replay(self, block: PersistedInstance, event_type: str, receipt: Any) -> None:
        raise RuntimeError("broken replay")


@pytest.mark.parametrize("where", ["enter", "exit"])
def test_hook_errors_are_logged_never_raised(where: str, caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    inbox = MemoryInbox(store)
    plugins = [IdempotencyPlugin(inbox), Broken(where)]
    with caplog.at_level(logging.ERROR, logger="django_xsm.persistence"):
        for _ in range(2):
            with persisted(store, "order:1", MACHINE, plugins=plugins) as order:
                order.send("ADD", idempotency_key="e1")
    assert store.load("order:1").snapshot["context"]["items"] == 1
    failures = [r.getMessage().split(" hook ")[0] for r in caplog.records]
    assert failures.count("phase") == 6  # each of 3 phases of 2 blocks, once
    assert failures.count("on_replay") == 1
    with pytest.raises(RuntimeError, match="boom"):  # not swallowed by the phase
        with persisted(store, "order:1", MACHINE, plugins=plugins) as order:
            order.send("BOOM")


def test_process_plugins_join_every_block_once() -> None:
    rec = Recorder()
    add_process_plugin(rec)
    try:
        add_process_plugin(rec)
        assert process_plugins() == (rec,)
        own = Recorder()
        with persisted(MemoryStore(), "order:1", MACHINE, plugins=[own]) as order:
            assert [h for h in order.hooks if isinstance(h, Recorder)] == [own]
        with persisted(MemoryStore(), "order:1", MACHINE) as order:
            assert order.hooks == [rec]
            order.send("ADD")
        assert rec.calls[-1] == "exit commit"  # its phases run too
        with pytest.raises(TypeError):
            add_process_plugin(object())  # type: ignore[arg-type]
    finally:
        remove_process_plugin(rec)
    assert process_plugins() == ()
    with persisted(MemoryStore(), "order:1", MACHINE) as order:
        assert order.hooks == []
