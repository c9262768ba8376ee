"""persisted(): load, send, commit once at exit — and only when something
changed. Every test checks the store itself, not just the receipts."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet

from django_xsm.exceptions import (
    EventNotAcceptedError,
    InstanceNotFoundError,
    InvalidConfigError,
    SnapshotCorruptError,
    XsmError,
)
from django_xsm.persistence import (
    AuditPlugin,
    FernetCodec,
    IdempotencyPlugin,
    PessimisticLock,
    Plugin,
    ReplayedReceipt,
    persisted,
)
from django_xsm.persistence.records import ClaimRequest, OpenRequest
from tests.persistence.conftest import block_clock
from tests.support import Backends, order_machine, snap, timer_machine, unit


def state_of(b: Backends, key: str) -> tuple[Any, ...]:
    """Everything a write could touch: record, due index, log."""
    record = b.store.load(key)
    due = [k for k, _ in b.store.due_keys(4_000_000_000, limit=1000) if k == key]
    return (
        None if record is None else (record.version, record.updated_ms, dict(record.snapshot)),
        due,
        [r.to_dict() for r in b.log.read(key)],
    )


def plugins(b: Backends) -> list[Any]:
    return [IdempotencyPlugin(b.inbox), AuditPlugin(b.log)]


def test_a_block_commits_once_at_exit(b: Backends) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m, plugins=plugins(b)) as order:
        for _ in range(3):
            order.send("ADD")
        assert b.store.load("o:1") is None  # nothing written before exit
    record = b.store.load("o:1")
    assert record.version == 1 and record.snapshot["context"] == {"items": 3}
    assert [r.version for r in b.log.read("o:1")] == [1, 1, 1]
    assert order.committed is not None and order.committed.version == 1


def test_reads_write_nothing(b: Backends) -> None:
    block_clock(b)
    m = timer_machine()
    with persisted(b.store, "t:1", m, plugins=plugins(b)) as t:
        t.send("POKE")
    before = state_of(b, "t:1")
    block_clock(b).advance(60_000)
    with persisted(b.store, "t:1", m, plugins=plugins(b)) as t:
        assert t.matches("waiting") and t.context == {"fired": 0}
        assert t.can("CANCEL") and len(t.deadlines) == 1 and t.snapshot()
    assert state_of(b, "t:1") == before


def test_refused_events_write_nothing(b: Backends) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m) as order:
        order.send("ADD")
    before = state_of(b, "o:1")
    with persisted(b.store, "o:1", m, plugins=plugins(b)) as order:
        receipt = order.send("SHIP", actor="bob")
        assert not receipt.accepted
    assert state_of(b, "o:1") == before


def test_duplicates_write_nothing(b: Backends) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m, plugins=plugins(b)) as order:
        order.send("ADD", idempotency_key="evt-1")
    before = state_of(b, "o:1")
    with persisted(b.store, "o:1", m, plugins=plugins(b)) as order:
        assert order.send("ADD", idempotency_key="evt-1").duplicate
    with persisted(b.store, "o:1", m, plugins=plugins(b), idempotency_key="blk") as order:
        order.send("ADD")
    after_block = state_of(b, "o:1")
    with persisted(b.store, "o:1", m, plugins=plugins(b), idempotency_key="blk") as order:
        assert order.duplicate
        order.send("ADD")
    assert before[0][0] + 1 == after_block[0][0]
    assert state_of(b, "o:1") == after_block


def test_a_read_of_a_missing_key_creates_nothing(b: Backends) -> None:
    with persisted(b.store, "o:1", order_machine(), plugins=plugins(b)) as order:
        assert order.created and order.value == "cart"
        order.send("SHIP")  # refused: still nothing to create
    assert b.store.load("o:1") is None
    assert list(b.store.list_keys()) == []


def test_context_mutated_directly_in_the_body_is_saved(b: Backends) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m) as order:
        order.send("ADD")
    with persisted(b.store, "o:1", m) as order:
        order.context["note"] = "gift wrap"
    record = b.store.load("o:1")
    assert record.version == 2 and record.snapshot["context"]["note"] == "gift wrap"


def test_initial_context_is_used_for_a_new_instance(b: Backends) -> None:
    with persisted(b.store, "o:1", order_machine(), context={"items": 10}) as order:
        order.send("ADD")
    assert b.store.load("o:1").snapshot["context"] == {"items": 11}


def test_create_false_raises_instance_not_found_and_writes_nothing(b: Backends) -> None:
    with pytest.raises(InstanceNotFoundError):
        with persisted(b.store, "o:404", order_machine(), create=False):
            pytest.fail("the body must not run")
    assert b.store.load("o:404") is None


def test_a_strict_block_refuses_unaccepted_events_and_writes_nothing(b: Backends) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m) as order:
        order.send("ADD")
    before = state_of(b, "o:1")
    with pytest.raises(EventNotAcceptedError) as err:
        with persisted(b.store, "o:1", m, strict=True, plugins=plugins(b)) as order:
            order.send("ADD")
            order.send("SHIP")
    assert err.value.key == "o:1" and err.value.event_type == "SHIP"
    assert state_of(b, "o:1") == before


def test_strict_per_send_refuses_only_that_send(b: Backends) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m, plugins=plugins(b)) as order:
        order.send("ADD")
        with pytest.raises(EventNotAcceptedError):
            order.send("SHIP", strict=True)
        assert not order.send("SHIP").accepted  # the block itself is not strict
    assert b.store.load("o:1").snapshot["context"] == {"items": 1}
    assert [r.event_type for r in b.log.read("o:1")] == ["ADD"]


def test_an_exception_in_the_body_writes_nothing_and_releases_claims_and_lock(
    b: Backends,
) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m) as order:
        order.send("ADD")
    before = state_of(b, "o:1")
    lock = PessimisticLock(timeout=0)
    with pytest.raises(RuntimeError, match="boom"):
        with persisted(b.store, "o:1", m, plugins=plugins(b), lock=lock) as order:
            order.send("ADD", idempotency_key="evt-1")
            assert b.store.lock_holder("o:1") == order.token
            raise RuntimeError("boom")
    assert state_of(b, "o:1") == before
    assert b.store.lock_holder("o:1") is None
    assert b.inbox.get("", "o:1", "evt-1") is None
    # The next opener gets the lock at once and the key runs for real.
    with persisted(b.store, "o:1", m, plugins=plugins(b), lock=lock) as order:
        assert not isinstance(order.send("ADD", idempotency_key="evt-1"), ReplayedReceipt)
    assert b.store.load("o:1").snapshot["context"] == {"items": 2}


def test_a_block_level_claim_is_released_by_an_exception(b: Backends) -> None:
    m = order_machine()
    with pytest.raises(RuntimeError):
        with persisted(b.store, "o:1", m, plugins=plugins(b), idempotency_key="req-1"):
            raise RuntimeError("view crashed")
    assert b.inbox.get("", "o:1", "req-1") is None
    with persisted(b.store, "o:1", m, plugins=plugins(b), idempotency_key="req-1") as order:
        assert not order.duplicate
        order.send("ADD")
    assert b.inbox.get("", "o:1", "req-1")["state"] == "done"


def test_an_action_that_raises_poisons_the_block(b: Backends) -> None:
    calls: list[int] = []

    def flaky(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        calls.append(1)
        ctx["items"] += 1
        if len(calls) == 2:
            raise ValueError("payment gateway down")

    m = order_machine(actions={"add": flaky})
    with persisted(b.store, "o:1", m) as order:
        order.send("ADD")
    before = state_of(b, "o:1")
    with pytest.raises(XsmError, match="event failed inside the block") as err:
        with persisted(b.store, "o:1", m, plugins=plugins(b)) as order:
            with pytest.raises(ValueError):
                order.send("ADD")
            with pytest.raises(XsmError, match="earlier event"):
                order.send("PAY")
            # swallowing the action's error must not let a partial commit through
    assert isinstance(err.value.__cause__, ValueError)
    assert state_of(b, "o:1") == before


@pytest.mark.parametrize("how", ["committed", "nothing to write", "raised", "refused open"])
def test_the_block_is_unusable_after_exit(b: Backends, how: str) -> None:
    m = order_machine()
    order: Any = None
    if how == "refused open":
        with pytest.raises(InstanceNotFoundError):
            with persisted(b.store, "o:1", m, create=False):
                pass
        blocked = persisted(b.store, "o:1", m, create=False)
        order = blocked.block
    else:
        with pytest.raises(RuntimeError) if how == "raised" else _nullcontext():
            with persisted(b.store, "o:1", m) as order:
                if how == "committed":
                    order.send("ADD")
                if how == "raised":
                    raise RuntimeError
    before = state_of(b, "o:1")
    with pytest.raises(XsmError):
        order.send("ADD")
    assert state_of(b, "o:1") == before


def test_bad_keys_and_plugins_are_refused_before_any_io(b: Backends) -> None:
    m = order_machine()
    for key in ("", "a\nb", "x" * 600, 42):
        with pytest.raises(InvalidConfigError):
            persisted(b.store, key, m)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError):
        persisted(b.store, "o:1", m, plugins=[object()])
    with pytest.raises(InvalidConfigError, match="IdempotencyPlugin"):
        persisted(b.store, "o:1", m, idempotency_key="k")
    with persisted(b.store, "o:1", m) as order, pytest.raises(InvalidConfigError):
        order.send("ADD", idempotency_key="k")
    assert b.store.load("o:1") is None


@pytest.mark.parametrize("what", ["inbox", "log"])
def test_an_inbox_or_log_that_does_not_share_the_commit_is_refused_before_any_io(
    b: Backends, what: str
) -> None:
    """One atomic commit is the only commit: an inbox or log on another
    server (or prefix) than the store is a configuration error when the
    block is built, and the store's own commit refuses it too."""
    import fakeredis

    from django_xsm.redis import RedisInbox, RedisLog

    elsewhere = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    foreign: Any = (RedisInbox if what == "inbox" else RedisLog)(elsewhere, prefix="other")
    plugin = IdempotencyPlugin(foreign) if what == "inbox" else AuditPlugin(foreign)
    with pytest.raises(InvalidConfigError) as err:
        persisted(b.store, "o:1", order_machine(), plugins=[plugin])
    assert err.value.path == what
    assert "does not commit with the store" in str(err.value)
    assert f"leave it out: IdempotencyPlugin() and AuditPlugin() then use store.{what}" in str(
        err.value
    )
    with pytest.raises(InvalidConfigError, match="does not commit with the store"):
        b.store.commit(unit("o:1", 0, snap(items=1)), **{what: foreign})
    if what == "inbox":  # the store's own open checks its claims' inbox the same way
        claims = (ClaimRequest("acct", "o:1", "idem", "fp", "w", 5_000),)
        with pytest.raises(InvalidConfigError, match="does not commit with the store"):
            b.store.open(OpenRequest("o:1", claims=claims), inbox=foreign)
    assert b.store.load("o:1") is None
    assert elsewhere.dbsize() == 0


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_corrupt_record_fails_clearly_at_open_and_writes_nothing(b: Backends) -> None:
    m = order_machine()
    with persisted(b.store, "o:1", m) as order:
        order.send("ADD")
    if b.client is not None:
        b.client.hset(b.store.layout.snapshot("o:1"), "d", b"{not json")
    else:
        # the bytes are JSON, not ours (a codec that refuses clear records)
        b.store.codec = FernetCodec([Fernet.generate_key()], accept_clear=False)
    with pytest.raises(SnapshotCorruptError):
        with persisted(b.store, "o:1", m, lock=PessimisticLock(timeout=0)):
            pytest.fail("the body must not run")
    assert b.store.lock_holder("o:1") is None


def test_plugins_see_every_send_and_may_refuse_one_before_it_runs(b: Backends) -> None:
    seen: list[tuple[str, Any]] = []

    class Guard(Plugin):
        def before_send(self, block: Any, event_type: str, payload: Any) -> None:
            if payload.get("n", 0) > 5:
                raise ValueError("too many")

        def after_send(self, block: Any, event_type: str, receipt: Any) -> None:
            seen.append((event_type, receipt.accepted))

        def after_commit(self, block: Any, result: Any) -> None:
            seen.append(("commit", result.version))

    with persisted(b.store, "o:1", order_machine(), plugins=[Guard()]) as order:
        with pytest.raises(ValueError):
            order.send("ADD", n=9)  # refused before the engine: the block stays usable
        order.send("ADD", n=2)
        order.send("SHIP")
    assert seen == [("ADD", True), ("SHIP", False), ("commit", 1)]
    assert b.store.load("o:1").snapshot["context"] == {"items": 2}


def test_send_takes_every_event_form_the_engine_takes(b: Backends) -> None:
    """One event contract everywhere: a type string, a mapping with 'type',
    or an engine Event (the persisted block once refused the last)."""
    from django_xsm.engine import Event
    from django_xsm.exceptions import InvalidEventError

    with persisted(b.store, "order:1", order_machine()) as order:
        assert order.send("ADD", n=1).accepted
        assert order.send({"type": "ADD", "n": 2}).accepted
        assert order.send(Event("ADD", {"n": 3})).accepted
        with pytest.raises(InvalidEventError, match="'type'"):
            order.send("ADD", type="PAY")
        with pytest.raises(InvalidEventError):
            order.send(42)
    assert b.store.load("order:1").snapshot["context"]["items"] == 6
