"""IdempotencyPlugin through persisted(): the first claim wins, duplicates
replay the stored receipt and run nothing, keys are explicit only, and a
dead worker blocks its key only until its lease ends."""

from __future__ import annotations

import decimal
import json
import time
from typing import Any

import pytest

from django_xsm.engine.run.snapshot import SNAPSHOT_KEYS
from django_xsm.exceptions import (
    EventNotAcceptedError,
    IdempotencyInFlightError,
    IdempotencyKeyError,
    IdempotencyMismatchError,
    InvalidConfigError,
    LockTimeoutError,
)
from django_xsm.persistence import (
    AuditPlugin,
    IdempotencyPlugin,
    PessimisticLock,
    ReplayedReceipt,
    persisted,
    retry_on_conflict,
)
from tests.support import Backends, order_machine


class Counted:
    """An order machine whose ``add`` action counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

        def add(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
            self.runs += 1
            ctx["items"] += int(event.get("n", 1))

        self.machine = order_machine(actions={"add": add})


def idem(b: Backends, **kw: Any) -> list[Any]:
    return [IdempotencyPlugin(b.inbox, **kw)]


def test_a_duplicate_after_commit_replays_the_receipt_and_runs_nothing(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        first = order.send("ADD", n=2, idempotency_key="evt-1")
    version = b.store.load("o:1").version
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        again = order.send("ADD", n=2, idempotency_key="evt-1")
    assert isinstance(again, ReplayedReceipt) and again.duplicate
    assert (again.event_type, again.accepted, again.changed, again.value, again.status) == (
        "ADD", first.accepted, first.changed, first.value, first.status,
    )  # fmt: skip
    assert c.runs == 1 and b.store.load("o:1").version == version


def test_the_first_claim_wins_and_a_duplicate_in_flight_is_refused(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as first:
        first.send("ADD", idempotency_key="evt-1")
        with pytest.raises(IdempotencyInFlightError) as err:
            with persisted(b.store, "o:2", c.machine, plugins=idem(b)) as other:
                other.send("ADD", idempotency_key="evt-1")  # another instance: its own key
                with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as second:
                    second.send("ADD", idempotency_key="evt-1")
        assert 1 <= err.value.retry_after_s <= 30 and err.value.idempotency_key == "evt-1"
    assert c.runs == 2  # o:1 once, o:2 once; the refused second o:1 never ran
    assert b.store.load("o:1").snapshot["context"]["items"] == 1
    assert b.store.load("o:2") is None  # its block failed: nothing written


def test_same_key_with_a_different_payload_is_a_mismatch(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        order.send("ADD", n=1, idempotency_key="evt-1")
    for event, payload in (("ADD", {"n": 2}), ("PAY", {"n": 1}), ("ADD", {})):
        with pytest.raises(IdempotencyMismatchError):
            with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
                order.send(event, idempotency_key="evt-1", **payload)
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        order.send("ADD", n=5, idempotency_key="evt-2")
        with pytest.raises(IdempotencyMismatchError):
            order.send("ADD", n=6, idempotency_key="evt-2")  # same block, other payload
        assert order.send("ADD", n=5, idempotency_key="evt-2").duplicate
    assert c.runs == 2 and b.store.load("o:1").snapshot["context"]["items"] == 6


def test_a_key_given_at_open_makes_the_whole_block_idempotent(b: Backends) -> None:
    c = Counted()
    kw = {"idempotency_key": "req-1", "fingerprint": "POST /orders/1/add", "principal": "acct"}
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), **kw) as order:
        assert not order.duplicate
        r1 = order.send("ADD")
        r2 = order.send("PAY")
        order.set_result({"status": 201, "body": {"items": order.context["items"]}})
    version = b.store.load("o:1").version
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), **kw) as order:
        assert order.duplicate
        assert order.replayed_result == {"status": 201, "body": {"items": 1}}
        replays = [order.send("ADD"), order.send("PAY")]
    assert [(r.event_type, r.value, r.duplicate) for r in replays] == [
        ("ADD", r1.value, True), ("PAY", r2.value, True),
    ]  # fmt: skip
    assert c.runs == 1 and b.store.load("o:1").version == version
    row = b.inbox.get("acct", "o:1", "req-1")
    assert row is not None and row["state"] == "done"
    with pytest.raises(IdempotencyMismatchError):
        with persisted(b.store, "o:1", c.machine, plugins=idem(b), **{**kw, "fingerprint": "x"}):
            pass
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), **{**kw, "principal": "b"}) as o:
        assert not o.duplicate  # another principal, another scope


def test_log_records_carry_the_key_they_ran_under(b: Backends) -> None:
    c = Counted()
    plugins = [*idem(b), AuditPlugin(b.log)]
    with persisted(b.store, "o:1", c.machine, plugins=plugins, idempotency_key="req-1") as o:
        o.send("ADD")
    with persisted(b.store, "o:1", c.machine, plugins=plugins) as o:
        o.send("ADD", idempotency_key="evt-2")
        o.send("ADD")
    assert [r.idempotency_key for r in b.log.read("o:1")] == ["req-1", "evt-2", ""]


def test_a_block_result_replays_exactly_or_is_refused_when_set(b: Backends) -> None:
    c = Counted()
    result = {"amount": decimal.Decimal("1.50"), "dims": (1, 2), "raw": b"\x00"}
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="r") as order:
        order.send("ADD")
        order.set_result(result)
        result["amount"] = 0  # the stored result is a copy
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="r") as order:
        assert order.replayed_result == {**result, "amount": decimal.Decimal("1.50")}
    with pytest.raises(TypeError, match=r"\$\.result\.tags"):
        with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="s") as o:
            o.send("ADD")
            o.set_result({"tags": {"a set"}})
    assert c.runs == 2 and b.store.load("o:1").version == 1


def test_a_block_key_in_flight_is_refused_at_open(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="req") as one:
        one.send("ADD")
        with pytest.raises(IdempotencyInFlightError):
            with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="req"):
                pytest.fail("the body must not run")
    assert c.runs == 1 and b.store.load("o:1").version == 1


def test_an_open_refused_by_a_busy_lock_takes_no_claim(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, lock=PessimisticLock()):
        with pytest.raises(LockTimeoutError):
            with persisted(
                b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="req-1",
                lock=PessimisticLock(timeout=0),
            ):  # fmt: skip
                pass
        assert b.inbox.get("", "o:1", "req-1") is None
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="req-1") as o:
        assert not o.duplicate
        o.send("ADD")
    assert c.runs == 1


def test_a_block_whose_result_was_not_set_replays_none(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="r") as order:
        order.send("ADD")
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="r") as order:
        assert order.duplicate and order.replayed_result is None


def _abandon(b: Backends, c: Counted, plugins: list[Any]) -> Any:
    """A worker that claims and then dies: its block never exits."""
    zombie = persisted(b.store, "o:1", c.machine, plugins=plugins)
    zombie.__enter__().send("ADD", n=100, idempotency_key="evt-1")
    return zombie


def _wait_until(condition: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_a_dead_worker_blocks_its_key_only_until_the_lease_ends(b: Backends) -> None:
    c = Counted()
    plugins = idem(b, lease_s=0.2)
    _abandon(b, c, plugins)
    with pytest.raises(IdempotencyInFlightError):
        with persisted(b.store, "o:1", c.machine, plugins=plugins) as order:
            order.send("ADD", n=100, idempotency_key="evt-1")
    if "clock" in b.extra:
        b.extra["clock"].advance(200)
    else:  # Redis: leases expire by the server's clock
        _wait_until(lambda: b.inbox.get("", "o:1", "evt-1") is None)
    with persisted(b.store, "o:1", c.machine, plugins=plugins) as order:
        assert not isinstance(order.send("ADD", n=100, idempotency_key="evt-1"), ReplayedReceipt)
    assert c.runs == 2  # the zombie's run, which was never committed, and ours
    assert b.store.load("o:1").snapshot["context"]["items"] == 100


def test_keys_are_only_explicit_never_taken_from_the_payload(b: Backends) -> None:
    c = Counted()
    for _ in range(2):
        with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
            order.send({"type": "ADD", "idempotency_key": "evt-1", "id": "evt-1"})
    assert c.runs == 2 and b.store.load("o:1").snapshot["context"]["items"] == 2
    assert b.inbox.get("", "o:1", "evt-1") is None


def test_nothing_of_idempotency_appears_in_context_or_snapshot(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key="req-zz") as o:
        o.send("ADD", idempotency_key="evt-secret-zz")
    record = b.store.load("o:1")
    assert set(record.snapshot) == set(SNAPSHOT_KEYS)
    assert record.snapshot["context"] == {"items": 1}
    assert "-zz" not in json.dumps(dict(record.snapshot), default=str)


@pytest.mark.parametrize(
    "key", ["", "x" * 256, "a\nb", "tab\there", "\x00", " lead", "trail ", "é", 42, b"k"]
)
def test_malformed_keys_are_refused_and_write_nothing(b: Backends, key: Any) -> None:
    c = Counted()
    with pytest.raises(IdempotencyKeyError):
        with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
            order.send("ADD", idempotency_key=key)
    with pytest.raises(IdempotencyKeyError):
        with persisted(b.store, "o:1", c.machine, plugins=idem(b), idempotency_key=key):
            pass
    assert c.runs == 0 and b.store.load("o:1") is None
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        order.send("ADD", idempotency_key="x" * 255)  # the longest key is fine


def test_the_scope_of_a_key_is_its_principal(b: Backends) -> None:
    c = Counted()
    plugins = idem(b, principal=lambda event: str(event.get("acct", "")))
    for acct in ("acct_1", "acct_2", "acct_1"):
        with persisted(b.store, "o:1", c.machine, plugins=plugins) as order:
            order.send("ADD", acct=acct, idempotency_key="evt-1")
    assert c.runs == 2
    assert b.inbox.get("acct_1", "o:1", "evt-1")["state"] == "done"
    assert b.inbox.get("acct_2", "o:1", "evt-1")["state"] == "done"
    assert b.inbox.get("", "o:1", "evt-1") is None


def test_a_refused_event_does_not_consume_its_key(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        order.send("ADD")
        assert not order.send("SHIP", idempotency_key="ship-1").accepted
    assert b.inbox.get("", "o:1", "ship-1") is None
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        order.send("PAY")
        assert order.send("SHIP", idempotency_key="ship-1").accepted
    assert b.store.load("o:1").snapshot["value"] == "shipped"


def test_a_strictly_refused_keyed_send_can_be_retried_in_the_same_block(b: Backends) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        with pytest.raises(EventNotAcceptedError):
            order.send("SHIP", idempotency_key="s-1", strict=True)
        order.send("PAY")
        receipt = order.send("SHIP", idempotency_key="s-1")
        assert receipt.accepted and not isinstance(receipt, ReplayedReceipt)
    assert b.store.load("o:1").snapshot["value"] == "shipped"
    assert b.inbox.get("", "o:1", "s-1")["state"] == "done"


def test_a_refused_keyed_send_runs_again_in_the_same_block_once_acceptable(
    b: Backends,
) -> None:
    c = Counted()
    with persisted(b.store, "o:1", c.machine, plugins=idem(b)) as order:
        assert not order.send("SHIP", idempotency_key="s-1").accepted
        order.send("PAY")
        assert order.send("SHIP", idempotency_key="s-1").accepted
        assert order.send("SHIP", idempotency_key="s-1").duplicate
    assert b.store.load("o:1").snapshot["value"] == "shipped"


def test_plugin_settings_are_validated() -> None:
    for bad in ({"ttl_s": 0}, {"lease_s": -1}, {"ttl_s": True}):
        with pytest.raises(InvalidConfigError):
            IdempotencyPlugin(object(), **bad)


def test_a_send_repeating_the_block_key_is_covered_by_the_block_claim(b: Backends) -> None:
    c = Counted()
    plugins = [IdempotencyPlugin(b.inbox), AuditPlugin(b.log)]
    for _ in range(2):
        with persisted(b.store, "o:1", c.machine, plugins=plugins, idempotency_key="req-1") as o:
            receipt = o.send("ADD", n=2, idempotency_key="req-1")
    # the second block was a duplicate: its send replays, nothing runs again
    assert c.runs == 1 and receipt.duplicate and receipt.accepted
    assert b.store.load("o:1").snapshot["context"]["items"] == 2
    # one row only: the block's, holding the send's receipt
    row = b.inbox.get("", "o:1", "req-1")
    assert row["state"] == "done" and row["receipt"]["receipts"][0]["event_type"] == "ADD"
    assert [r.idempotency_key for r in b.log.read("o:1")] == ["req-1"]


# --- concurrency on a real server --------------------------------------------------------


def _hammer(base: Backends, store: Any, n: int, errors: list[BaseException]) -> None:
    """Worker ``n``: 40 keyed ADDs on two hot keys, each sent twice (a
    client retry), every block retried on conflict."""
    plugins = [IdempotencyPlugin(base.inbox), AuditPlugin(base.log)]

    def add(key: str, idem: str) -> None:
        with persisted(store, key, order_machine(), plugins=plugins, idempotency_key=idem) as b:
            b.send("ADD")

    try:
        for i in range(40):
            key, idem = f"order:{i % 2}", f"w{n}-{i}"
            for _ in range(2):
                retry_on_conflict(lambda k=key, i=idem: add(k, i), attempts=50, max_s=0.02)
    except BaseException as exc:  # pragma: no cover - reported by the test
        errors.append(exc)


@pytest.mark.live
def test_many_workers_and_retries_apply_every_key_once() -> None:
    """Four workers (stores) x 3 threads send 40 keyed ADDs each on two hot
    keys, every key sent twice, with conflict retries: each key is applied
    exactly once and logged once."""
    import threading

    from django_xsm.redis import RedisStore
    from tests.support import backend_factory

    for factory in backend_factory("live"):
        base = factory()
        stores = [RedisStore(base.client, prefix=base.store.prefix, buckets=4) for _ in range(4)]
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_hammer, args=(base, stores[n % 4], n, errors))
            for n in range(12)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors[:3]
        items = [base.store.load(k).snapshot["context"]["items"] for k in ("order:0", "order:1")]
        assert sum(items) == 12 * 40
        logged = [r.idempotency_key for k in ("order:0", "order:1") for r in base.log.read(k)]
        assert len(logged) == len(set(logged)) == 12 * 40
