"""An exception injected at every point of a block's path — claim, open,
send, encode, commit, marks, log, hooks — leaves the instance consistent
and the key usable: the lock is free at once, claims are released (or
done), and the next block commits normally."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from django_xsm.exceptions import (
    IdempotencyInFlightError,
    PartialCommitError,
    StoreUnavailableError,
)
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
    """Delegates to a real store; ``open`` / ``commit`` can fail before or
    after the real call (after = the work was done, the reply was lost)."""

    def __init__(self, inner: Any, faults: Faults) -> None:
        self.inner = inner
        self.faults = faults
        self.lock_ttl_ms = inner.lock_ttl_ms
        self.max_snapshot_bytes = inner.max_snapshot_bytes
        self.clock = inner.clock

    def shares_commit(self, other: object) -> bool:
        return bool(self.inner.shares_commit(other))

    def open(self, request: Any, **kw: Any) -> Any:
        self.faults.hit("open:before")
        result = self.inner.open(request, **kw)
        self.faults.hit("open:after")
        return result

    def commit(self, unit: Any, **kw: Any) -> Any:
        self.faults.hit("commit:before")
        result = self.inner.commit(unit, **kw)
        self.faults.hit("commit:after")
        return result

    def release_lock(self, key: str, token: str) -> bool:
        return bool(self.inner.release_lock(key, token))


class FaultyInbox:
    """An inbox that does not share the store's commit (explicit methods
    only, so no backend mistakes it for its own)."""

    def __init__(self, inner: Any, faults: Faults) -> None:
        self.inner = inner
        self.faults = faults

    def claim(self, request: Any) -> Any:
        outcome = self.inner.claim(request)
        self.faults.hit("claim:after")
        return outcome

    def mark(self, mark: Any) -> bool:
        self.faults.hit("mark:before")
        return bool(self.inner.mark(mark))

    def release(self, release: Any) -> bool:
        return bool(self.inner.release(release))


class FaultyLog:
    def __init__(self, inner: Any, faults: Faults) -> None:
        self.inner = inner
        self.faults = faults
        self.maxlen = None

    def append_next(self, key: str, entry: Any, *, version: int) -> int:
        self.faults.hit("log:before")
        return int(self.inner.append_next(key, entry, version=version))


class FailingHook(Plugin):
    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def after_commit(self, block: Any, result: Any) -> None:
        self.faults.hit("after_commit")


# point -> (wrap the inbox?, wrap the log?, does the commit land?)
POINTS: dict[str, tuple[bool, bool, bool]] = {
    "claim:after": (True, False, False),
    "open:before": (True, False, False),
    "open:after": (True, False, False),
    "send": (False, False, False),
    "encode": (False, False, False),
    "commit:before": (False, False, False),
    "commit:after": (False, False, True),
    "mark:before": (True, False, True),
    "log:before": (False, True, True),
    "after_commit": (False, False, True),
}


def _seed(b: Backends) -> None:
    with persisted(b.store, "o:1", M) as order:
        order.send("ADD")


def _run_block(b: Backends, point: str, *, block_key: bool, lease_s: float | None = None) -> Faults:
    wrap_inbox, wrap_log, _ = POINTS[point]
    faults = Faults(point)
    inbox = FaultyInbox(b.inbox, faults) if wrap_inbox else b.inbox
    log = FaultyLog(b.log, faults) if wrap_log else b.log
    plugins = [IdempotencyPlugin(inbox, lease_s=lease_s), AuditPlugin(log), FailingHook(faults)]
    kw: dict[str, Any] = {"idempotency_key": "req-1"} if block_key else {}
    # A failing after_commit hook is logged, not raised: the commit is durable.
    raises = (
        contextlib.nullcontext()
        if point == "after_commit"
        else pytest.raises((Injected, PartialCommitError, TypeError, RuntimeError))
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


@pytest.mark.parametrize("block_key", [False, True], ids=["send-key", "block-key"])
@pytest.mark.parametrize("point", list(POINTS))
def test_a_fault_at_any_point_leaves_the_key_consistent_and_usable(
    b: Backends, point: str, block_key: bool
) -> None:
    _seed(b)
    _run_block(b, point, block_key=block_key)
    lands = POINTS[point][2]
    record = b.store.load("o:1")
    # Consistent: either the whole block's state or none of it.
    assert (record.version, record.snapshot["context"]["items"]) == ((2, 11) if lands else (1, 1))
    # Usable: the lock is free at once (timeout=0) ...
    assert b.store.lock_holder("o:1") is None
    # ... the claim is released, or done when the commit landed with its
    # mark; a partial commit (the unshared inbox failed after the snapshot
    # landed) leaves it leased, so a retry is refused rather than run twice.
    idem = "req-1" if block_key else "evt-1"
    row = b.inbox.get("", "o:1", idem)
    if point == "mark:before":
        assert row is not None and row["state"] == "in_flight"
    else:
        assert row is None or (lands and row["state"] == "done")
    # ... and the next block commits normally.
    with persisted(b.store, "o:1", M, lock=PessimisticLock(timeout=0)) as order:
        order.send("ADD")
    assert b.store.load("o:1").version == record.version + 1


@pytest.mark.parametrize("point", ["commit:after", "log:before", "after_commit"])
def test_a_retry_after_a_lost_commit_reply_is_a_duplicate_not_a_second_effect(
    b: Backends, point: str
) -> None:
    _seed(b)
    _run_block(b, point, block_key=False)
    with persisted(b.store, "o:1", M, plugins=[IdempotencyPlugin(b.inbox)]) as order:
        receipt = order.send("ADD", n=10, idempotency_key="evt-1")
    assert isinstance(receipt, ReplayedReceipt) and receipt.duplicate
    assert b.store.load("o:1").snapshot["context"]["items"] == 11


def test_a_mark_lost_with_an_unshared_inbox_refuses_retries_until_the_lease_ends(
    b: Backends,
) -> None:
    """The documented limit of an inbox that does not share the store's
    commit: the snapshot landed, its mark did not (PartialCommitError). The
    claim stays leased, so a retry within the lease is refused as in flight;
    once the lease ends the key is free and a retry runs again. Share the
    inbox with the store (same Redis and prefix) to avoid it."""
    _seed(b)
    _run_block(b, "mark:before", block_key=False, lease_s=0.2)
    plugins = [IdempotencyPlugin(b.inbox)]
    with pytest.raises(IdempotencyInFlightError):
        with persisted(b.store, "o:1", M, plugins=plugins) as order:
            order.send("ADD", n=10, idempotency_key="evt-1")
    assert b.store.load("o:1").snapshot["context"]["items"] == 11
    b.pass_time(300)
    with persisted(b.store, "o:1", M, plugins=plugins) as order:
        receipt = order.send("ADD", n=10, idempotency_key="evt-1")
    assert not isinstance(receipt, ReplayedReceipt)
    assert b.store.load("o:1").snapshot["context"]["items"] == 21


def test_a_partial_commit_reports_the_durable_version(b: Backends) -> None:
    _seed(b)
    faults = Faults("log:before")
    plugins = [AuditPlugin(FaultyLog(b.log, faults))]
    with pytest.raises(PartialCommitError) as err:
        with persisted(b.store, "o:1", M, plugins=plugins) as order:
            order.send("ADD")
    assert (err.value.version, err.value.part) == (2, "log")
    assert b.store.load("o:1").version == 2


def test_a_log_failure_with_an_unshared_log_keeps_seqs_gapless(b: Backends) -> None:
    _seed(b)
    _run_block(b, "log:before", block_key=False)
    with persisted(b.store, "o:1", M, plugins=[AuditPlugin(b.log)]) as order:
        order.send("ADD")
    assert [(r.seq, r.version) for r in b.log.read("o:1")] == [(1, 3)]


def test_an_after_commit_hook_error_is_logged_and_not_raised(
    b: Backends, caplog: pytest.LogCaptureFixture
) -> None:
    _seed(b)
    with caplog.at_level("ERROR", logger="django_xsm.persistence"):
        faults = _run_block(b, "after_commit", block_key=False)
    assert "after_commit" in faults.reached
    assert "after_commit hook" in caplog.text and "o:1" in caplog.text
    assert b.store.load("o:1").snapshot["context"]["items"] == 11
