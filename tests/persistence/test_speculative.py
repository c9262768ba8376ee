"""Speculative blocks: ``persisted(..., speculative=True)``.

A key this store committed last opens warm (no round trip); the commit
carries the idempotency claim and the proof that the record did not
change since. Checked here: one round trip per warm keyed block, a
duplicate found at commit replays and writes nothing, a stale base is a
conflict that a retry turns into one applied effect, and a warm block
that writes nothing (or fails) proves its base before its outcome
counts. Redis flavours (fakeredis, and the live server when
``XSM_REDIS_URL`` is set): the memory store answers every open from its
own state, so it is never warm; its commit honours folded marks and the
base stamp all the same (the contract tests at the end).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from django_xsm.exceptions import (
    ArgumentTypeError,
    ConflictError,
    EventNotAcceptedError,
    IdempotencyInFlightError,
    IdempotencyMismatchError,
    InvalidConfigError,
)
from django_xsm.persistence import (
    AuditPlugin,
    IdempotencyPlugin,
    PessimisticLock,
    apersisted,
    persisted,
    retry_on_conflict,
)
from django_xsm.persistence.records import ClaimRequest, ClaimStatus, InboxMark
from tests.support import (
    Backends,
    backend_factory,
    count_round_trips,
    order_machine,
    snap,
    unit,
)

REDIS = ["fakeredis", pytest.param("live", marks=pytest.mark.live)]
ALL = ["memory", *REDIS]


@pytest.fixture(params=REDIS)
def rb(request: pytest.FixtureRequest) -> Any:
    """Redis backends (fakeredis, live) and the factory that made them."""
    for factory in backend_factory(request.param):
        yield factory(), factory


def _plugins(b: Backends) -> list[Any]:
    return [IdempotencyPlugin(b.inbox), AuditPlugin(b.log)]


def _add(b: Backends, key: str, idem: str | None, *, store: Any = None, **kw: Any) -> Any:
    """One speculative block sending ADD; returns the block."""
    with persisted(
        store or b.store,
        key,
        order_machine(),
        plugins=_plugins(b),
        speculative=True,
        idempotency_key=idem,
        **kw,
    ) as block:
        block.send("ADD")
        block.set_result({"items": block.context["items"]})
    return block


def _items(b: Backends, key: str) -> int:
    record = b.store.load(key)
    assert record is not None
    return int(record.snapshot["context"]["items"])


def _twin(b: Backends) -> Any:
    """Another store on the same namespace: another worker."""
    from django_xsm.redis import RedisStore

    return RedisStore(b.client, prefix=b.store.prefix, buckets=4)


# --- warm opens ---------------------------------------------------------------------


def test_a_key_this_store_committed_opens_warm_and_costs_one_round_trip(
    rb: Any, monkeypatch: pytest.MonkeyPatch
):
    b, _ = rb
    first = _add(b, "order:1", "k1")
    assert not first.warm  # nothing remembered yet: a plain open
    with count_round_trips(monkeypatch) as rt:
        second = _add(b, "order:1", "k2")
    assert second.warm
    assert rt.count == 1  # the commit, with the claim folded in
    assert second.committed is not None and second.committed.version == 2
    assert _items(b, "order:1") == 2
    history = b.log.read("order:1")
    assert [r.idempotency_key for r in history] == ["k1", "k2"]
    assert b.inbox.get("", "order:1", "k2")["state"] == "done"


def test_without_speculative_the_store_remembers_nothing(rb: Any):
    b, _ = rb
    with persisted(b.store, "order:1", order_machine(), plugins=_plugins(b)) as block:
        block.send("ADD")
    assert b.store.core.warm is None
    assert not _add(b, "order:1", "k1").warm


def test_a_duplicate_found_at_commit_replays_and_writes_nothing(
    rb: Any, monkeypatch: pytest.MonkeyPatch
):
    b, _ = rb
    _add(b, "order:1", "k1")
    _add(b, "order:1", "k2")
    _add(b, "order:1", "k3")  # warm again after k2
    with count_round_trips(monkeypatch) as rt:
        again = _add(b, "order:1", "k2")  # a client retry of k2
    assert again.warm and again.replayed_at_close and again.duplicate
    assert again.committed is None
    assert again.replayed_result == {"items": 2}  # what k2 stored, not what the body saw
    assert rt.count == 1
    assert _items(b, "order:1") == 3
    assert len(b.log.read("order:1")) == 3


def test_a_duplicate_emits_nothing_into_the_outbox(rb: Any):
    b, _ = rb
    from django_xsm.redis import RedisOutbox

    outbox = RedisOutbox(b.client, prefix=b.store.prefix, buckets=4)

    def add_and_emit(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
        ctx["items"] += 1
        instance.emit({"type": "ADDED"})

    machine = order_machine(actions={"add": add_and_emit})
    replayed = []
    for idem in ("k1", "k2", "k2"):
        with persisted(
            b.store, "order:1", machine, plugins=_plugins(b), speculative=True, idempotency_key=idem
        ) as block:
            block.send("ADD")
        replayed.append(block.replayed_at_close)
    assert replayed == [False, False, True]
    assert [e.event["type"] for e, _, _ in outbox.pending(limit=10)] == ["ADDED", "ADDED"]


def test_a_stale_base_is_a_conflict_and_a_retry_applies_the_event_once(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")  # our store remembers version 1
    _add(b, "order:1", "k2", store=_twin(b))  # another worker moves it to 2
    runs: list[bool] = []

    def attempt() -> Any:
        with persisted(
            b.store,
            "order:1",
            order_machine(),
            plugins=_plugins(b),
            speculative=True,
            idempotency_key="k3",
        ) as block:
            runs.append(block.warm)
            block.send("ADD")
        return block

    with pytest.raises(ConflictError):
        attempt()
    assert _items(b, "order:1") == 2  # the stale commit wrote nothing
    assert b.inbox.get("", "order:1", "k3") is None  # nor claimed the key
    final = retry_on_conflict(attempt, attempts=2)
    assert runs == [True, False]  # the conflict dropped the warm record
    assert final.committed is not None and _items(b, "order:1") == 3


def test_a_record_rebuilt_to_the_same_version_is_not_the_base(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    # Redis lost the key and someone rebuilt it to the same version: only
    # the newest commit id can tell (the floor went with the flush).
    layout = b.store.core.state.layout
    b.client.delete(layout.snapshot("order:1"), layout.floors(layout.bucket("order:1")))
    twin = _twin(b)
    _add(b, "order:1", None, store=twin)
    assert twin.load("order:1").version == 1
    with pytest.raises(ConflictError) as caught:
        _add(b, "order:1", "k2")
    assert caught.value.reason == "base"


def test_a_read_drops_a_warm_record_it_disproves(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    _add(b, "order:1", "k2", store=_twin(b))
    assert b.store.load("order:1").version == 2  # a plain read sees the change
    block = _add(b, "order:1", "k3")
    assert not block.warm and block.committed is not None


def test_the_warm_records_are_bounded(rb: Any):
    b, _ = rb
    from django_xsm.redis import RedisStore

    store = RedisStore(b.client, prefix=b.store.prefix, buckets=4, warm_records=2)
    for key in ("order:1", "order:2", "order:3"):
        _add(b, key, None, store=store)
    assert len(store.core.warm) == 2
    assert not _add(b, "order:1", None, store=store).warm
    assert _add(b, "order:3", None, store=store).warm


def test_warm_records_zero_turns_speculative_opens_into_plain_reads(rb: Any):
    b, _ = rb
    from django_xsm.redis import RedisStore

    store = RedisStore(b.client, prefix=b.store.prefix, buckets=4, warm_records=0)
    _add(b, "order:1", "k1", store=store)
    assert not _add(b, "order:1", "k2", store=store).warm
    assert _items(b, "order:1") == 2


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, 10**8])
def test_warm_records_is_checked(bad: Any):
    from django_xsm.redis import RedisStore

    with pytest.raises(InvalidConfigError, match="warm_records"):
        RedisStore("redis://127.0.0.1:1/0", prefix="t", warm_records=bad)


def test_delete_and_forget_drop_the_warm_record(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    b.store.forget("order:1")
    block = _add(b, "order:1", "k2")
    assert not block.warm and block.created


# --- warm blocks that write nothing, or fail -----------------------------------------


def test_a_warm_read_only_block_proves_its_base(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    with persisted(b.store, "order:1", order_machine(), speculative=True) as block:
        assert block.warm
    assert block.committed is None  # fresh: nothing to write
    _add(b, "order:1", "k2", store=_twin(b))
    with (
        pytest.raises(ConflictError),
        persisted(b.store, "order:1", order_machine(), speculative=True) as block,
    ):
        assert block.context["items"] == 1  # what we committed, now stale
    with persisted(b.store, "order:1", order_machine(), speculative=True) as block:
        assert not block.warm and block.context["items"] == 2


def test_a_refusal_seen_on_a_stale_base_is_a_conflict_not_a_refusal(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    twin = _twin(b)
    with persisted(twin, "order:1", order_machine(), plugins=_plugins(b)) as block:
        block.send("PAY")  # another worker: cart -> paid
    with persisted(twin, "order:1", order_machine(), plugins=_plugins(b)) as block:
        block.send("SHIP")
    # Our memory says "cart", where SHIP is refused; the store says
    # "shipped". The refusal came from a stale read: a conflict, retried.
    with (
        pytest.raises(ConflictError),
        persisted(b.store, "order:1", order_machine(), speculative=True, strict=True) as block,
    ):
        block.send("SHIP")


def test_a_refusal_on_a_fresh_base_stands_and_releases_the_claim(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    with (
        pytest.raises(EventNotAcceptedError),
        persisted(
            b.store,
            "order:1",
            order_machine(),
            plugins=_plugins(b),
            speculative=True,
            strict=True,
            idempotency_key="k2",
        ) as block,
    ):
        assert block.warm
        block.send("SHIP")
    assert b.inbox.get("", "order:1", "k2") is None  # may run again later


def test_a_failed_body_whose_key_had_finished_replays(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")  # we remember v1, in cart
    with persisted(
        _twin(b), "order:1", order_machine(), plugins=_plugins(b), idempotency_key="k2"
    ) as block:
        block.send("PAY")  # k2 ran on another worker: paid
        block.set_result("paid")
    # A retry of k2 reaches us: on our stale memory SHIP is refused, but the
    # key had finished, so the first attempt's answer stands.
    with persisted(
        b.store,
        "order:1",
        order_machine(),
        plugins=_plugins(b),
        speculative=True,
        strict=True,
        idempotency_key="k2",
    ) as block:
        assert block.warm
        block.send("SHIP")
    assert block.replayed_at_close and block.duplicate
    assert block.replayed_result == "paid"
    assert b.store.load("order:1").version == 2


def test_an_interrupt_is_never_suppressed(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    with (
        pytest.raises(KeyboardInterrupt),
        persisted(
            b.store, "order:1", order_machine(), plugins=_plugins(b), speculative=True,
            idempotency_key="k1",
        ),
    ):  # fmt: skip
        raise KeyboardInterrupt


# --- idempotency outcomes at commit ----------------------------------------------------


def test_a_key_in_flight_elsewhere_is_refused_at_commit(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def holder() -> None:
        try:
            twin_store = _twin(b)
            with persisted(
                twin_store, "order:1", order_machine(), plugins=_plugins(b), idempotency_key="k2"
            ) as block:
                entered.set()
                release.wait(10)
                block.send("ADD")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert entered.wait(10)
        with pytest.raises(IdempotencyInFlightError):
            _add(b, "order:1", "k2")
        assert _items(b, "order:1") == 1
    finally:
        release.set()
        thread.join(10)
    assert not errors
    assert _items(b, "order:1") == 2


def test_another_fingerprint_is_refused_at_commit(rb: Any):
    b, _ = rb
    _add(b, "order:1", "k1")
    with (
        pytest.raises(IdempotencyMismatchError),
        persisted(
            b.store,
            "order:1",
            order_machine(),
            plugins=_plugins(b),
            speculative=True,
            idempotency_key="k1",
            fingerprint="another request body",
        ) as block,
    ):
        assert block.warm
        block.send("ADD")
    assert _items(b, "order:1") == 1


# --- options ------------------------------------------------------------------------------


def test_speculative_needs_the_optimistic_lock(rb: Any):
    b, _ = rb
    with pytest.raises(InvalidConfigError, match="optimistic"):
        persisted(b.store, "k", order_machine(), speculative=True, lock=PessimisticLock())


def test_speculative_must_be_a_bool(rb: Any):
    b, _ = rb
    with pytest.raises(ArgumentTypeError, match="speculative"):
        persisted(b.store, "k", order_machine(), speculative="yes")  # type: ignore[arg-type]


# --- concurrency on a real server --------------------------------------------------------


def _hammer(
    base: Backends, store: Any, n: int, errors: list[BaseException], warm: list[bool]
) -> None:
    """Worker ``n``: 40 keyed ADDs on two hot keys, each sent twice."""
    try:
        for i in range(40):
            key, idem = f"order:{i % 2}", f"w{n}-{i}"
            for _ in range(2):
                block = retry_on_conflict(
                    lambda k=key, i=idem: _add(base, k, i, store=store), attempts=50, max_s=0.02
                )
                warm.append(block.warm)
    except BaseException as exc:  # pragma: no cover - reported by the test
        errors.append(exc)


@pytest.mark.live
def test_many_workers_and_retries_apply_every_key_once():
    """Four workers (stores) x 3 threads send 40 keyed ADDs each on two hot
    keys, every key sent twice (a client retry), speculative with conflict
    retries: each key is applied exactly once and logged once."""
    from django_xsm.redis import RedisStore

    for factory in backend_factory("live"):
        base = factory()
        stores = [RedisStore(base.client, prefix=base.store.prefix, buckets=4) for _ in range(4)]
        errors: list[BaseException] = []
        warm: list[bool] = []
        threads = [
            threading.Thread(target=_hammer, args=(base, stores[n % 4], n, errors, warm))
            for n in range(12)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors[:3]
        total = _items(base, "order:0") + _items(base, "order:1")
        assert total == 12 * 40
        logged = [r.idempotency_key for k in ("order:0", "order:1") for r in base.log.read(k)]
        assert len(logged) == len(set(logged)) == 12 * 40
        assert any(warm)  # the warm path was taken (and proven)


# --- asyncio ----------------------------------------------------------------------------------


async def test_apersisted_opens_warm_too():
    import fakeredis

    from django_xsm.redis import AsyncRedisInbox, AsyncRedisLog, AsyncRedisStore

    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    store = AsyncRedisStore(client, prefix="t", buckets=4)
    plugins = [
        IdempotencyPlugin(AsyncRedisInbox(client, prefix="t", buckets=4)),
        AuditPlugin(AsyncRedisLog(client, prefix="t", buckets=4)),
    ]
    seen = []
    for idem in ("k1", "k2", "k2"):
        async with apersisted(
            store, "order:1", order_machine(), plugins=plugins, speculative=True,
            idempotency_key=idem,
        ) as block:  # fmt: skip
            block.send("ADD")
        seen.append((block.warm, block.replayed_at_close))
    assert seen == [(False, False), (True, False), (True, True)]
    record = await store.load("order:1")
    assert record is not None and record.snapshot["context"]["items"] == 2


# --- the store contract: folded marks and the base stamp (every backend) -----------------


@pytest.fixture(params=ALL)
def anyb(request: pytest.FixtureRequest) -> Any:
    for factory in backend_factory(request.param):
        yield factory()


def _claim(key: str, idem: str, fp: str = "fp") -> ClaimRequest:
    return ClaimRequest(
        scope="", instance_key=key, idempotency_key=idem, fingerprint=fp, owner="o1", lease_ms=5000
    )


def test_contract_a_folded_mark_on_a_free_row_commits(anyb: Backends):
    mark = InboxMark(_claim("k", "i1"), {"r": 1}, 60_000, folded=True)
    result = anyb.store.commit(unit("k", 0, snap(), marks=(mark,)), inbox=anyb.inbox)
    assert result.claim is None and result.version == 1
    assert anyb.inbox.get("", "k", "i1")["state"] == "done"


@pytest.mark.parametrize(
    ("fp", "status"), [("fp", ClaimStatus.DONE), ("other", ClaimStatus.MISMATCH)]
)
def test_contract_a_folded_mark_on_a_finished_row_writes_nothing(
    anyb: Backends, fp: str, status: str
):
    first = InboxMark(_claim("k", "i1"), {"r": 1}, 60_000, folded=True)
    anyb.store.commit(unit("k", 0, snap()), inbox=anyb.inbox)
    anyb.store.commit(unit("k", 1, snap(items=1), marks=(first,)), inbox=anyb.inbox)
    again = InboxMark(_claim("k", "i1", fp), {"r": 2}, 60_000, folded=True)
    # expected version 1 is stale (the first made 2): the claim is checked first
    result = anyb.store.commit(unit("k", 1, snap(items=9), marks=(again,)), inbox=anyb.inbox)
    assert result.claim is not None and result.claim.status == status
    assert result.version == 2
    if status == ClaimStatus.DONE:
        assert result.claim.receipt == {"r": 1}
    assert anyb.store.load("k").snapshot["context"]["items"] == 1


def test_contract_a_folded_mark_on_a_live_lease_is_in_flight(anyb: Backends):
    anyb.store.commit(unit("k", 0, snap()), inbox=anyb.inbox)
    held = anyb.inbox.claim(
        ClaimRequest(
            scope="", instance_key="k", idempotency_key="i1", fingerprint="fp", owner="o2",
            lease_ms=60_000,
        )
    )  # fmt: skip
    assert held.status == ClaimStatus.CLAIMED
    mark = InboxMark(_claim("k", "i1"), {"r": 1}, 60_000, folded=True)
    result = anyb.store.commit(unit("k", 1, snap(items=1), marks=(mark,)), inbox=anyb.inbox)
    assert result.claim is not None and result.claim.status == ClaimStatus.IN_FLIGHT
    assert result.claim.retry_after_ms > 0
    assert anyb.store.load("k").version == 1


def test_contract_the_base_commit_must_be_the_newest(anyb: Backends):
    first = unit("k", 0, snap())
    anyb.store.commit(first)
    with pytest.raises(ConflictError):
        anyb.store.commit(unit("k", 1, snap(items=1), base_commit_id="someone-else"))
    result = anyb.store.commit(unit("k", 1, snap(items=1), base_commit_id=first.commit_id))
    assert result.version == 2


def test_contract_an_open_names_the_newest_commit(anyb: Backends):
    from django_xsm.persistence.records import OpenRequest

    first = unit("k", 0, snap())
    anyb.store.commit(first)
    assert anyb.store.open(OpenRequest("k")).commit_id == first.commit_id
