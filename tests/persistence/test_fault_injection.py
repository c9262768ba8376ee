"""An exception injected at every point of a block's path — claim, open,
send, encode, commit, hooks — leaves the instance consistent and the key
usable: the lock is free at once, claims are released (or done), and the
next block commits normally. Marks and log records ride in the commit's
one atomic step, so they land with it or not at all."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from django_xsm.exceptions import StoreUnavailableError
from django_xsm.persistence import (
    AuditPlugin,
    IdempotencyPlugin,
    PessimisticLock,
    Plugin,
    ReplayedReceipt,
    persisted,
)
from tests.support import Backends, order_machine

M = order_machine()


class Injected(StoreUnavailableError):
    def __init__(self, where: str) -> None:
        super().__init__(f"injected fault at {where}")


class Faults:
    """Which points fail, and how many times each was reached."""

    def __init__(self, *points: str) -> None:
        self.points = set(points)
        self.reached: list[str] = []

    def hit(self, point: str) -> None:
        self.reached.append(point)
        if point in self.points:
            raise Injected(point)


class FaultyStore:
    """Delegates to a real store; its ``open`` / ``commit`` operations can
    fail before or after the real one (after = the work was done, the
    reply was lost)."""

    def __init__(self, inner: Any, faults: Faults) -> None:
        self.inner = inner
        self.faults = faults
        self.lock_ttl_ms = inner.lock_ttl_ms
        self.max_snapshot_bytes = inner.max_snapshot_bytes
        self.clock = inner.clock
        self.driver = inner.driver
        self.inbox, self.log = FaultyInbox(inner.inbox, faults), inner.log

    def shares_commit(self, other: object) -> bool:
        return bool(self.inner.shares_commit(_unwrapped(other)))

    def open_op(self, request: Any) -> Any:
        self.faults.hit("open:before")
        result = yield from self.inner.open_op(request)
        self.faults.hit("open:after")
        return result

    def commit_op(self, unit: Any, *, log: Any = None) -> Any:
        self.faults.hit("commit:before")
        result = yield from self.inner.commit_op(unit, log=log)
        self.faults.hit("commit:after")
        return result

    def release_lock_op(self, key: str, token: str) -> Any:
        return (yield from self.inner.release_lock_op(key, token))


class FaultyInbox:
    """FaultyStore's inbox (it unwraps it to ask the real store whether it
    shares the commit), whose claim round trip loses its reply."""

    def __init__(self, inner: Any, faults: Faults) -> None:
        self.inner = inner
        self.faults = faults

    def claim_op(self, request: Any) -> Any:
        outcome = yield from self.inner.claim_op(request)
        self.faults.hit("claim:after")
        return outcome

    def release_op(self, release: Any) -> Any:
        return (yield from self.inner.release_op(release))


def _unwrapped(inbox: Any) -> Any:
    return inbox.inner if isinstance(inbox, FaultyInbox) else inbox


class FailingHook(Plugin):
    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def after_commit(self, block: Any, result: Any) -> None:
        self.faults.hit("after_commit")


# point -> does the commit land?
POINTS: dict[str, bool] = {
    "claim:after": False,
    "open:before": False,
    "open:after": False,
    "send": False,
    "encode": False,
    "commit:before": False,
    "commit:after": True,
    "after_commit": True,
}
# A key given at open is claimed inside the open (see open:after), never
# in a claim round trip of its own.
CASES = [
    (point, block_key)
    for point in POINTS
    for block_key in (False, True)
    if not (block_key and point == "claim:after")
]


def _seed(b: Backends) -> None:
    with persisted(b.store, "o:1", M) as order:
        order.send("ADD")


def _run_block(b: Backends, point: str, *, block_key: bool) -> Faults:
    faults = Faults(point)
    # the store's own inbox: FaultyStore's loses the reply of a claim
    plugins = [IdempotencyPlugin(), AuditPlugin(b.log), FailingHook(faults)]
    kw: dict[str, Any] = {"idempotency_key": "req-1"} if block_key else {}
    # A failing after_commit hook is logged, not raised: the commit is durable.
    raises = (
        contextlib.nullcontext()
        if point == "after_commit"
        else pytest.raises((Injected, TypeError, RuntimeError))
    )
    with raises:
        with persisted(
            FaultyStore(b.store, faults), "o:1", M, plugins=plugins,
            lock=PessimisticLock(timeout=0), **kw,
        ) as order:  # fmt: skip
            if block_key:
                order.send("ADD", n=10)
            else:
                order.send("ADD", n=10, idempotency_key="evt-1")
            if point == "send":
                raise RuntimeError("the body failed")
            if point == "encode":
                order.context["tags"] = {"not", "json"}
    assert point in faults.reached or point in ("send", "encode")
    return faults


@pytest.mark.parametrize(
    ("point", "block_key"),
    CASES,
    ids=[f"{p}-{'block' if k else 'send'}-key" for p, k in CASES],
)
def test_a_fault_at_any_point_leaves_the_key_consistent_and_usable(
    b: Backends, point: str, block_key: bool
) -> None:
    _seed(b)
    _run_block(b, point, block_key=block_key)
    lands = POINTS[point]
    record = b.store.load("o:1")
    # Consistent: either the whole block's state or none of it.
    assert (record.version, record.snapshot["context"]["items"]) == ((2, 11) if lands else (1, 1))
    # Usable: the lock is free at once (timeout=0) ...
    assert b.store.lock_holder("o:1") is None
    # ... the claim is released, or done when the commit landed with its
    # mark, and the log holds the block's records exactly when it landed ...
    idem = "req-1" if block_key else "evt-1"
    row = b.inbox.get("", "o:1", idem)
    assert row is None or (lands and row["state"] == "done")
    if lands:
        assert row is not None
    assert [r.version for r in b.log.read("o:1")] == ([2] if lands else [])
    # ... and the next block commits normally.
    with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)) as order:
        order.send("ADD")
    assert b.store.load("o:1").version == record.version + 1


@pytest.mark.parametrize("point", ["commit:after", "after_commit"])
def test_a_retry_after_a_lost_commit_reply_is_a_duplicate_not_a_second_effect(
    b: Backends, point: str
) -> None:
    _seed(b)
    _run_block(b, point, block_key=False)
    with persisted(b.store, "o:1", M, plugins=[IdempotencyPlugin(b.inbox)]) as order:
        receipt = order.send("ADD", n=10, idempotency_key="evt-1")
    assert isinstance(receipt, ReplayedReceipt) and receipt.duplicate
    assert b.store.load("o:1").snapshot["context"]["items"] == 11


def test_an_after_commit_hook_error_is_logged_and_not_raised(
    b: Backends, caplog: pytest.LogCaptureFixture
) -> None:
    _seed(b)
    with caplog.at_level("ERROR", logger="django_xsm.persistence"):
        faults = _run_block(b, "after_commit", block_key=False)
    assert "after_commit" in faults.reached
    assert "after_commit hook" in caplog.text and "o:1" in caplog.text
    assert b.store.load("o:1").snapshot["context"]["items"] == 11
