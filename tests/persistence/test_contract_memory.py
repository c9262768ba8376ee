"""The shared contract on MemoryStore, MemoryInbox and MemoryLog (the Redis
backends on an in-process fakeredis, built as a user builds them)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError
from django_xsm.persistence import (
    AuditPlugin,
    IdempotencyPlugin,
    MemoryInbox,
    MemoryLog,
    MemoryStore,
    persisted,
)
from django_xsm.redis import RedisOutbox
from tests.persistence.contract import (
    CommitContract,
    InboxContract,
    LogContract,
    StoreContract,
)
from tests.persistence.contract_maintenance import MaintenanceContract
from tests.support import FakeClock, fakeredis_client, order_machine, snap


class TestMemoryStore(StoreContract):
    flavour = "memory"


class TestMemoryInbox(InboxContract):
    flavour = "memory"


class TestMemoryLog(LogContract):
    flavour = "memory"


class TestMemoryCommit(CommitContract):
    flavour = "memory"


class TestMemoryMaintenance(MaintenanceContract):
    flavour = "memory"


# --- how the in-process backends are built -------------------------------------------


def test_each_one_built_alone_shares_nothing() -> None:
    first, second = MemoryStore(), MemoryStore()
    first.save("order:1", snap(), expected_version=0)
    assert second.load("order:1") is None
    assert not first.shares_commit(MemoryInbox()) and not first.shares_commit(MemoryLog())


def test_one_built_on_another_shares_its_server_and_commits_with_it() -> None:
    log = MemoryLog(maxlen=10)
    store = MemoryStore(log=log)
    inbox = MemoryInbox(store)
    assert store.shares_commit(inbox) and store.shares_commit(log)
    assert MemoryStore(inbox).shares_commit(MemoryLog(inbox))
    plugins = [IdempotencyPlugin(inbox), AuditPlugin(log)]
    for _ in range(2):
        with persisted(store, "order:1", order_machine(), plugins=plugins) as order:
            order.send("ADD", idempotency_key="evt-1", actor="alice")
    assert store.load("order:1").version == 1
    assert [r.event_type for r in log.read("order:1")] == ["ADD"]
    assert store.forget("order:1")["log"] == 1 and log.read("order:1") == []


def test_an_inbox_and_a_log_built_on_a_store_seal_with_its_codec() -> None:
    pytest.importorskip("cryptography")
    from cryptography.fernet import Fernet

    from django_xsm.persistence import FernetCodec

    store = MemoryStore(codec=FernetCodec([Fernet.generate_key()]))
    inbox, log = MemoryInbox(store), MemoryLog(store)
    assert inbox.core.codec is store.codec and log.core.codec is store.codec
    plugins = [IdempotencyPlugin(inbox), AuditPlugin(log)]
    with persisted(store, "order:1", order_machine(), plugins=plugins) as order:
        order.send({"type": "ADD", "note": "MARKER-7"}, idempotency_key="evt-1", actor="alice")
    raw = b"".join(repr(store.client.dump(key)).encode() for key in store.client.scan_iter("*"))
    assert b"MARKER-7" not in raw and b"alice" not in raw
    assert log.read("order:1")[0].payload["note"] == "MARKER-7"
    assert MemoryInbox().core.codec is not store.codec  # built alone: no codec of a store


def test_sharing_with_something_else_is_refused() -> None:
    with pytest.raises(ArgumentTypeError) as err:
        MemoryInbox(fakeredis_client())
    assert err.value.path == "server"
    with pytest.raises(InvalidConfigError, match="different in-process servers"):
        MemoryStore(MemoryInbox(), log=MemoryLog())


def test_the_clock_given_stamps_logs_and_arms_deadlines() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    log = MemoryLog(store)
    with persisted(store, "order:1", order_machine(), plugins=[AuditPlugin(log)]) as order:
        order.send("ADD")
    assert [r.timestamp_ms for r in log.read("order:1")] == [clock.now]


@pytest.mark.parametrize("missing", ["fakeredis", "lupa"])
def test_without_the_embedded_extra_building_one_says_what_to_install(
    missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    for build in (MemoryStore, MemoryInbox, MemoryLog):
        with pytest.raises(InvalidConfigError) as err:
            build()
        assert missing in str(err.value) and 'pip install "django-xsm[embedded]"' in str(err.value)


def test_emitted_events_are_read_from_the_outbox_streams_as_on_redis() -> None:
    def add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        instance.emit({"type": "order.added"})

    store = MemoryStore()
    with persisted(store, "order:1", order_machine(actions={"add": add})) as order:
        order.send("ADD")
    [(entry, consumer, _idle)] = RedisOutbox(store.client, prefix=store.prefix).pending()
    assert (entry.key, entry.version, entry.event, consumer) == (
        "order:1",
        1,
        {"type": "order.added"},
        "",
    )
