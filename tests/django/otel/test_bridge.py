"""The bridge calls phase / on_lock_busy / on_replay around the block's own
steps, changes nothing for blocks whose plugins do not define them, and
never lets a hook's error change what a block does."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.contrib.otel import bridge
from django_xsm.exceptions import LockTimeoutError, StoreUnavailableError
from django_xsm.persistence import (
    IdempotencyPlugin,
    MemoryInbox,
    MemoryStore,
    PersistedInstance,
    PessimisticLock,
    Plugin,
    persisted,
)
from tests.django.otel.test_spans import MACHINE


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


@pytest.fixture(autouse=True)
def _bridge() -> Iterator[None]:
    bridge.install()
    yield
    bridge.uninstall()


def test_the_phases_wrap_the_block_hooks_in_order() -> None:
    rec = Recorder()
    with persisted(MemoryStore(), "order:1", MACHINE, plugins=[rec]) as order:
        order.send("ADD")
    assert rec.calls == [
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


def test_blocks_without_bridged_hooks_run_the_original_generators() -> None:
    with persisted(MemoryStore(), "order:1", MACHINE) as order:
        op = order.close_op(failed=True)
        assert op.__name__ == "close_op"  # not a phase wrapper
        op.close()
        order.closed = False
    rec = Recorder()
    with persisted(MemoryStore(), "order:1", MACHINE, plugins=[rec]) as order:
        op = order.close_op(failed=False)
        assert op.__name__ == "_phased"  # around the commit phase
        op.close()  # abandoned before it started: nothing ran
        assert "enter commit" not in rec.calls
        order.closed = False


class Broken(Plugin):
    """Every bridged hook raises; the phase also tries to swallow errors."""

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
    with caplog.at_level(logging.ERROR, logger="django_xsm.contrib.otel"):
        for _ in range(2):
            with persisted(store, "order:1", MACHINE, plugins=plugins) as order:
                order.send("ADD", idempotency_key="e1")
    assert store.load("order:1").snapshot["context"]["items"] == 1
    assert any("phase hook" in r.getMessage() for r in caplog.records)
    assert any("on_replay hook" in r.getMessage() for r in caplog.records)
    with pytest.raises(RuntimeError, match="boom"):  # not swallowed by the phase
        with persisted(store, "order:1", MACHINE, plugins=plugins) as order:
            order.send("BOOM")


def test_adopted_plugins_join_every_block_once_and_uninstall_restores() -> None:
    rec = Recorder()
    bridge.adopt(rec)
    bridge.adopt(rec)
    assert bridge.adopted() == (rec,)
    own = Recorder()
    with persisted(MemoryStore(), "order:1", MACHINE, plugins=[own]) as order:
        assert [h for h in order.hooks if isinstance(h, Recorder)] == [own]
    with persisted(MemoryStore(), "order:1", MACHINE) as order:
        assert order.hooks == [rec]
    with pytest.raises(TypeError):
        bridge.adopt(object())  # type: ignore[arg-type]
    bridge.uninstall()
    assert not bridge.installed() and bridge.adopted() == ()
    assert PersistedInstance.send.__name__ == "send"
    assert "__wrapped__" not in PersistedInstance.__dict__["open_op"].__dict__
