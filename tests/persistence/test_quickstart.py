# ruff: noqa: E501, E702
"""The seed quick start program (as in the README), verbatim but for its
imports and the construction of the backends, on memory, fakeredis and a
live server."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.persistence import (
    AuditPlugin,
    IdempotencyPlugin,
    MemoryInbox,
    MemoryLog,
    MemoryStore,
    persisted,
)
from tests.support import LIVE_URL, delete_namespace, live_only, unique_prefix


def run_seed(store: Any, inbox: Any, log: Any) -> None:
    # fmt: off
    cfg = {"id": "order", "initial": "cart", "context": {"items": 0},
           "states": {"cart": {"on": {"ADD": {"actions": "add"}, "PAY": "paid"}}, "paid": {"type": "final"}}}
    def add(i, ctx, e, a): ctx["items"] += 1
    machine = create_machine(cfg, logic=MachineLogic(actions={"add": add}))
    plugins = [IdempotencyPlugin(inbox, principal=lambda e: "acct_1"), AuditPlugin(log)]
    with persisted(store, "order:42", machine, plugins=plugins) as order:
        order.send("ADD", idempotency_key="evt_1", actor="alice")
    with persisted(store, "order:42", machine, plugins=plugins) as order:
        order.send("ADD", idempotency_key="evt_1", actor="alice")   # redelivery: deduplicated
        order.send("PAY", actor="alice", reason="checkout")
    record = store.load("order:42")
    assert record.version == 2 and record.machine_version == ""
    assert [(x.event_type, x.actor) for x in log.read("order:42")] == [("ADD", "alice"), ("PAY", "alice")]
    with persisted(store, "order:42", machine) as order:
        assert order.context["items"] == 1 and order.matches("order.paid")
    # fmt: on


def test_seed_quick_start_runs_on_memory_backends() -> None:
    store = MemoryStore()
    inbox, log = MemoryInbox(store), MemoryLog(store)
    assert store.shares_commit(inbox) and store.shares_commit(log)  # one atomic commit
    run_seed(store, inbox, log)


def test_seed_quick_start_runs_on_fakeredis() -> None:
    fakeredis = pytest.importorskip("fakeredis")
    from django_xsm.redis import RedisInbox, RedisLog, RedisStore

    r = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    # fmt: off
    store = RedisStore(r, prefix="shop"); inbox = RedisInbox(r, prefix="shop"); log = RedisLog(r, prefix="shop")
    # fmt: on
    run_seed(store, inbox, log)


@live_only
@pytest.mark.live
def test_seed_quick_start_runs_on_a_live_server() -> None:
    import redis

    from django_xsm.redis import RedisInbox, RedisLog, RedisStore

    r = redis.Redis.from_url(LIVE_URL)
    prefix = unique_prefix()
    try:
        # fmt: off
        store = RedisStore(r, prefix=prefix); inbox = RedisInbox(r, prefix=prefix); log = RedisLog(r, prefix=prefix)
        # fmt: on
        run_seed(store, inbox, log)
    finally:
        delete_namespace(r, prefix)
        r.close()
