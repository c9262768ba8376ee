"""Every script fails before its first write when a key it touches holds
another type (Redis does not roll back a script that fails half way).

For each scenario — one script call through the public API on a namespace
prepared with something in every kind of key — a clean run records the
call's KEYS and which keys it changed. Then, for every one of those KEYS in
turn, the same scenario runs on a fresh copy with a set (a type no script
uses) planted at that key: either the call is refused with WRONGTYPE and the
namespace is byte-identical, or the call succeeds and leaves the planted key
untouched — and a key the clean run changed must be refused. The scripts'
type proofs (a read that precedes every write, or a TYPE check of the keys
the call will write) are exercised key by key, branch by branch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_xsm.exceptions import StoreError
from django_xsm.persistence.outbox import Emitted
from django_xsm.persistence.records import (
    ClaimRequest,
    InboxMark,
    InboxRelease,
    OpenRequest,
    TimerFailure,
)
from django_xsm.redis.calls import Call
from tests.redis.helpers import entry, key_state, layout_of, namespace_keys, namespace_state
from tests.support import Backends, snap, unit

KEY = "order:1"


def claim(idem: str, scope: str = "acct", key: str = KEY) -> ClaimRequest:
    return ClaimRequest(scope, key, idem, "fp", "o1", 60_000)


def reset(b: Backends) -> None:
    schema = "{" + b.store.prefix + "}:schema"
    names = [k for k in namespace_keys(b.client, b.store.prefix) if k != schema.encode()]
    if names:
        b.client.delete(*names)
    b.store.ttl_s = None


def prepare(
    b: Backends,
    *,
    lock: bool = False,
    ttl: bool = False,
    dead: bool = False,
    waiter: bool = False,
) -> None:
    """order:1 at version 1 with deadlines, a log, inbox rows and (when
    asked) its lock held by 'tok' and a ttl; claims k1, k2 owned by o1;
    with ``dead``, a key whose snapshot vanished (what scans prune); with
    ``waiter``, a waiter for the held lock flagged (its release wakes it)."""
    reset(b)
    if dead:
        b.store.ttl_s = 60.0
        b.store.commit(
            unit("order:0", 0, snap(), state_ids=("order", "order.cart"), next_due_ms=1_000)
        )
        layout = layout_of(b.store)
        b.client.delete(layout.snapshot("order:0"))  # as if its ttl_s ran out
        b.client.zadd(layout.expiry(layout.bucket("order:0")), {"order:0": 1})
    b.store.ttl_s = 60.0 if ttl else None
    b.inbox.claim(claim("k0"))
    b.store.commit(
        unit(
            KEY,
            0,
            snap(items=1),
            state_ids=("order", "order.cart"),
            next_due_ms=1_900_000_000_000,
            marks=(InboxMark(claim("k0"), {"ok": 0}, 60_000),),
            log_entries=(entry(),),
        ),
        inbox=b.inbox,
        log=b.log,
    )
    b.inbox.claim(claim("k1"))
    b.inbox.claim(claim("k2"))
    if lock or waiter:
        b.store.acquire_lock(KEY, "tok", 60_000)
    if waiter:
        assert b.store.acquire_lock(KEY, "queued", 60_000) > 0
    b.store.ttl_s = None


def full_unit(**kw: Any) -> Any:
    kw.setdefault("snapshot", snap(items=9))
    return unit(
        KEY,
        kw.pop("expected", 1),
        kw.pop("snapshot"),
        state_ids=kw.pop("state_ids", ("order", "order.paid")),
        next_due_ms=kw.pop("next_due_ms", 1_950_000_000_000),
        timer_failures=kw.pop(
            "timer_failures", {"e:T": TimerFailure(3, 1_950_000_000_000, dead=True, error="x")}
        ),
        marks=kw.pop("marks", (InboxMark(claim("k1"), {"ok": 1}, 60_000),)),
        releases=kw.pop("releases", (InboxRelease(claim("k2")),)),
        log_entries=kw.pop("log_entries", (entry(), entry("PAY"))),
        emitted=kw.pop("emitted", (Emitted("d-1", {"type": "order.paid"}),)),
        **kw,
    )


def _commit(b: Backends, u: Any, ttl: float | None = None) -> None:
    b.store.ttl_s = ttl
    b.store.commit(u, inbox=b.inbox, log=b.log)


Scenario = tuple[Callable[[Backends], None], Callable[[Backends], None]]

SCENARIOS: dict[str, Scenario] = {
    "commit-everything": (
        lambda b: prepare(b, lock=True),
        lambda b: _commit(b, full_unit(lock_token="tok", release_lock=True)),
    ),
    "commit-everything-with-ttl": (
        prepare,
        lambda b: _commit(b, full_unit(), ttl=30.0),
    ),
    "commit-dropping-a-ttl": (
        lambda b: prepare(b, ttl=True),
        lambda b: _commit(b, full_unit(state_ids=("order", "order.cart"), timer_failures=None)),
    ),
    "commit-same-state-no-extras": (
        prepare,
        lambda b: _commit(
            b,
            full_unit(
                state_ids=("order", "order.cart"),
                timer_failures=None,
                marks=(),
                releases=(),
                log_entries=(),
                emitted=(),
                next_due_ms=None,
            ),
        ),
    ),
    "commit-marks-only": (
        prepare,
        lambda b: _commit(b, full_unit(snapshot=None, log_entries=(), emitted=())),
    ),
    "commit-creating": (
        prepare,
        lambda b: _commit(
            b,
            unit(
                "order:2",
                0,
                snap(),
                state_ids=("order", "order.cart"),
                next_due_ms=1_950_000_000_000,
                marks=(InboxMark(claim("k1", key="order:2"), {"ok": 1}, 60_000),),
                log_entries=(entry(),),
            ),
            ttl=30.0,
        ),
    ),
    "open-lock-and-claims": (
        prepare,
        lambda b: b.store.open(
            OpenRequest(KEY, "tok2", 5_000, claims=(claim("k5"), claim("k6", "other"))),
            inbox=b.inbox,
        ),
    ),
    "open-load-only": (
        prepare,
        lambda b: b.store.open(OpenRequest(KEY)),
    ),
    "delete": (prepare, lambda b: b.store.delete(KEY)),
    "forget": (lambda b: prepare(b, lock=True), lambda b: b.store.forget(KEY)),
    "park": (prepare, lambda b: b.store.park(KEY, reason="unreadable")),
    "record-timer-failure": (
        prepare,
        lambda b: b.store.record_timer_failure(
            KEY,
            expected_version=1,
            failures={"e:T": TimerFailure(1, 1_950_000_000_000, dead=True)},
            next_due_ms=None,
        ),
    ),
    "due-keys-pruning": (
        lambda b: prepare(b, dead=True),
        lambda b: list(b.store.due_keys(2_000_000_000, limit=10)),
    ),
    "list-page-pruning": (
        lambda b: prepare(b, dead=True),
        lambda b: b.store.list_page("", limit=10, state="order"),
    ),
    "prune-expired": (
        lambda b: prepare(b, dead=True),
        lambda b: b.store.prune_expired(limit=10),
    ),
    "acquire-lock": (prepare, lambda b: b.store.acquire_lock(KEY, "t", 5_000)),
    "acquire-busy-lock": (
        lambda b: prepare(b, lock=True),
        lambda b: b.store.acquire_lock(KEY, "t", 5_000),
    ),
    "open-busy-lock": (
        lambda b: prepare(b, lock=True),
        lambda b: b.store.open(OpenRequest(KEY, "tok2", 5_000)),
    ),
    "commit-waking-a-waiter": (
        lambda b: prepare(b, waiter=True),
        lambda b: _commit(b, full_unit(lock_token="tok", release_lock=True)),
    ),
    "release-lock-waking-a-waiter": (
        lambda b: prepare(b, waiter=True),
        lambda b: b.store.release_lock(KEY, "tok"),
    ),
    "claim": (prepare, lambda b: b.inbox.claim(claim("k7"))),
    "mark": (prepare, lambda b: b.inbox.mark(InboxMark(claim("k1"), {}, 60_000))),
    "release": (prepare, lambda b: b.inbox.release(InboxRelease(claim("k2")))),
    "log-append": (prepare, lambda b: b.log.append_next(KEY, entry(), version=1)),
}


@contextlib.contextmanager
def recording(b: Backends) -> Iterator[list[Call]]:
    """The script calls the store, inbox and log send."""
    calls: list[Call] = []
    patched = []
    for obj in {id(o): o for o in (b.store, b.inbox, b.log)}.values():
        driver = obj.driver
        original = driver._send

        def spy(request: Any, original: Any = original) -> Any:
            for r in getattr(request, "requests", None) or (request,):
                if isinstance(r, Call):
                    calls.append(r)
            return original(request)

        driver._send = spy
        patched.append((driver, original))
    try:
        yield calls
    finally:
        for driver, original in patched:
            driver._send = original


def touched(b: Backends, name: str) -> tuple[list[list[str]], set[str]]:
    """The KEYS of each of the scenario's calls, and the keys its clean run
    changed."""
    setup, run = SCENARIOS[name]
    setup(b)
    before = namespace_state(b.client, b.store.prefix)
    with recording(b) as calls:
        run(b)
    after = namespace_state(b.client, b.store.prefix)
    keys = [list(c.keys) for c in calls if c.script != "SCHEMA"]
    changed = {k.decode() for k in {*before, *after} if before.get(k) != after.get(k)}
    return keys, changed


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_wrong_type_at_any_key_fails_the_script_before_its_first_write(
    b: Backends, name: str
) -> None:
    per_call, changed = touched(b, name)
    assert per_call
    setup, run = SCENARIOS[name]
    refused = []
    for key in dict.fromkeys(k for keys in per_call for k in keys):
        # a scan sends one script per bucket: those without the key may write
        mine = {k.encode() for keys in per_call if key in keys for k in keys}
        setup(b)
        b.client.delete(key)
        b.client.sadd(key, "foreign")
        planted = key_state(b.client, key)
        before = namespace_state(b.client, b.store.prefix)
        try:
            run(b)
        except StoreError as exc:
            assert "WRONGTYPE" in str(exc) or "WRONGTYPE" in str(exc.__cause__), (key, exc)
            after = namespace_state(b.client, b.store.prefix)
            assert {k: after.get(k) for k in mine} == {k: before.get(k) for k in mine}, (
                f"{name}: wrote with a foreign {key}"
            )
            refused.append(key)
            continue
        assert key not in changed, f"{name}: a foreign {key} it writes was not refused"
        assert key_state(b.client, key) == planted, f"{name}: touched the foreign {key}"
    assert refused, f"{name}: no key was refused"
