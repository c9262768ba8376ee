"""RedisStore against MemoryStore, the reference: random operation
sequences, every observable result and every raised error class compared.

Runs on fakeredis, and on the live server (smaller budget) when
``XSM_REDIS_URL`` is set. Redis expiry follows the server clock while the
memory backends use a frozen FakeClock, so every lock, lease and receipt
here lives far longer than a run: expiry is tested elsewhere.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from django_xsm.exceptions import ConflictError
from django_xsm.persistence.records import (
    ClaimRequest,
    CommitUnit,
    InboxMark,
    InboxRelease,
    OpenRequest,
    TimerFailure,
)
from tests.redis.helpers import entry, snap
from tests.support import (
    LIVE_URL,
    delete_namespace,
    fakeredis_client,
    memory_backends,
    redis_backends,
    unique_prefix,
)

LONG = 3_600_000  # ms: nothing expires during a run
KEYS = st.sampled_from(["a", "ab", "a*", "a?1", "b[1]", "b\\", "é", "中", "order:1"])
SCOPES = st.sampled_from(["acct", "acct*", ""])
IDEMS = st.sampled_from(["k1", "k2", "k3"])
OWNERS = st.sampled_from(["w1", "w2"])
FPS = st.sampled_from(["fp", "fp2"])
TOKENS = st.sampled_from(["", "t1", "t2"])
PREFIXES = st.sampled_from(["", "a", "a*", "b", "b[", "é", "z"])
MACHINES = st.sampled_from(["order", "other"])
STATES = st.sampled_from([(), ("order", "order.cart"), ("order", "order.paid")])
DUES = st.one_of(st.none(), st.integers(1_000, 1_010))
FAILURES = st.one_of(
    st.none(),
    st.just({}),
    st.builds(lambda dead: {"e": TimerFailure(3, 5, dead=dead, error="Boom")}, st.booleans()),
)


def outcome(fn: Any) -> Any:
    """What a call returned, or the error it raised (class and facts)."""
    try:
        return ("ok", fn())
    except ConflictError as exc:
        # MemoryStore reports a lost claim with actual=expected whatever the
        # record holds; Redis reports the record's version: compare the reason.
        actual = None if exc.reason == "claim" else exc.actual
        return ("raise", "ConflictError", actual, exc.reason)
    except Exception as exc:
        return ("raise", type(exc).__name__)


def rec(r: Any) -> Any:
    if r is None:
        return None
    return (dict(r.snapshot), r.version, r.machine_version, r.machine_id, dict(r.timer_failures))


def claim_out(c: Any) -> Any:
    return (c.status, c.receipt, c.retry_after_ms > 0)


def norm(value: Any) -> Any:
    """Strip what legitimately differs (clocks) from a result."""
    kind = type(value).__name__
    if kind == "StoredRecord":
        return rec(value)
    if kind == "CommitResult":
        return (value.version, value.first_seq, value.replayed)
    if kind == "OpenResult":
        return (
            rec(value.record),
            value.floor,
            value.locked,
            value.lock_busy_ms > 0,
            [claim_out(c) for c in value.claims],
        )
    if kind == "ClaimOutcome":
        return claim_out(value)
    if kind == "TransitionRecord":
        return value.to_dict()
    if isinstance(value, dict) and "expires_ms" in value:
        return {k: v for k, v in value.items() if k != "expires_ms"}
    if isinstance(value, list | tuple):
        return [norm(v) for v in value]
    return value


class StoreComparison(RuleBasedStateMachine):
    flavour = "fakeredis"

    def __init__(self) -> None:
        super().__init__()
        self.mem = memory_backends()
        if self.flavour == "live":
            import redis

            client = redis.Redis.from_url(LIVE_URL)
        else:
            client = fakeredis_client()
        self.prefix = unique_prefix()
        self.red = redis_backends(client, self.prefix)
        self.last_unit: CommitUnit | None = None

    def teardown(self) -> None:
        if self.flavour == "live":
            delete_namespace(self.red.client, self.prefix)

    def both(self, call: Any) -> Any:
        """``call(backends)`` on memory and on Redis; the results must agree."""
        expected = norm(outcome(lambda: call(self.mem)))
        actual = norm(outcome(lambda: call(self.red)))
        assert actual == expected, f"redis {actual!r} != memory {expected!r}"
        return expected

    def version(self, key: str) -> int:
        r = self.mem.store.load(key)
        return r.version if r is not None else 0

    def expected_for(self, key: str, drift: int) -> int:
        return max(0, self.version(key) + drift)

    # --- records ---------------------------------------------------------------

    @rule(key=KEYS, items=st.integers(0, 3), drift=st.sampled_from([0, 0, 0, -1, 1]))
    def save(self, key: str, items: int, drift: int) -> None:
        expected = self.expected_for(key, drift)
        self.both(lambda b: b.store.save(key, snap(items=items), expected_version=expected))

    @rule(
        key=KEYS,
        items=st.one_of(st.none(), st.integers(0, 3)),
        drift=st.sampled_from([0, 0, 0, -1, 1]),
        machine=MACHINES,
        states=STATES,
        due=DUES,
        failures=FAILURES,
        token=TOKENS,
        release=st.booleans(),
        entries=st.integers(0, 2),
        marks=st.lists(st.tuples(SCOPES, IDEMS, OWNERS, FPS), max_size=2),
        releases=st.lists(st.tuples(SCOPES, IDEMS, OWNERS), max_size=1),
    )
    def commit(
        self,
        key: str,
        items: int | None,
        drift: int,
        machine: str,
        states: tuple[str, ...],
        due: int | None,
        failures: Any,
        token: str,
        release: bool,
        entries: int,
        marks: list[Any],
        releases: list[Any],
    ) -> None:
        expected = self.expected_for(key, drift)
        opened = self.mem.store.open(OpenRequest(key))
        unit = CommitUnit(
            key=key,
            commit_id=uuid.uuid4().hex,
            expected_version=expected,
            machine_id=machine,
            machine_version="v1",
            snapshot=None if items is None else snap(items=items),
            floor=opened.floor if expected == 0 else 0,
            state_ids=states,
            next_due_ms=due,
            timer_failures=failures,
            lock_token=token,
            release_lock=release,
            marks=tuple(
                InboxMark(ClaimRequest(s, key, i, fp, o, LONG), {"by": o}, LONG)
                for s, i, o, fp in {(s, i): (s, i, o, fp) for s, i, o, fp in marks}.values()
            ),
            releases=tuple(
                InboxRelease(ClaimRequest(s, key, i, "fp", o, LONG)) for s, i, o in releases
            ),
            log_entries=tuple(entry(f"E{n}", ts=1_000 + n) for n in range(entries)),
        )
        self.both(lambda b: b.store.commit(unit, inbox=b.inbox, log=b.log))
        self.last_unit = unit

    @precondition(lambda self: self.last_unit is not None)
    @rule()
    def retry_last_commit(self) -> None:
        """A client retry, possibly after other operations (both backends
        remember the last 8 commit ids)."""
        unit = self.last_unit
        self.both(lambda b: b.store.commit(unit, inbox=b.inbox, log=b.log))

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        self.both(lambda b: b.store.delete(key))

    @rule(key=KEYS)
    def forget(self, key: str) -> None:
        self.both(lambda b: b.store.forget(key))

    @rule(key=KEYS)
    def load(self, key: str) -> None:
        self.both(lambda b: b.store.load(key))

    @rule(
        key=KEYS,
        token=TOKENS,
        claims=st.lists(st.tuples(SCOPES, IDEMS, OWNERS, FPS), max_size=2),
    )
    def open(self, key: str, token: str, claims: list[Any]) -> None:
        unique = {(s, i): (s, i, o, fp) for s, i, o, fp in claims}.values()
        request = OpenRequest(
            key,
            token,
            LONG if token else 0,
            tuple(ClaimRequest(s, key, i, fp, o, LONG) for s, i, o, fp in unique),
        )
        self.both(lambda b: b.store.open(request, inbox=b.inbox))

    # --- locks --------------------------------------------------------------------

    @rule(key=KEYS, token=st.sampled_from(["t1", "t2"]))
    def acquire_lock(self, key: str, token: str) -> None:
        self.both(lambda b: b.store.acquire_lock(key, token, LONG) > 0)

    @rule(key=KEYS, token=st.sampled_from(["t1", "t2"]))
    def release_lock(self, key: str, token: str) -> None:
        self.both(lambda b: b.store.release_lock(key, token))

    # --- inbox ----------------------------------------------------------------------

    @rule(key=KEYS, scope=SCOPES, idem=IDEMS, owner=OWNERS, fp=FPS)
    def claim(self, key: str, scope: str, idem: str, owner: str, fp: str) -> None:
        c = ClaimRequest(scope, key, idem, fp, owner, LONG)
        self.both(lambda b: b.inbox.claim(c))

    @rule(key=KEYS, scope=SCOPES, idem=IDEMS, owner=OWNERS, fp=FPS)
    def mark(self, key: str, scope: str, idem: str, owner: str, fp: str) -> None:
        c = ClaimRequest(scope, key, idem, fp, owner, LONG)
        self.both(lambda b: b.inbox.mark(InboxMark(c, {"m": owner}, LONG)))

    @rule(key=KEYS, scope=SCOPES, idem=IDEMS, owner=OWNERS)
    def release(self, key: str, scope: str, idem: str, owner: str) -> None:
        c = ClaimRequest(scope, key, idem, "fp", owner, LONG)
        self.both(lambda b: b.inbox.release(InboxRelease(c)))

    @rule(key=KEYS, scope=SCOPES, idem=IDEMS)
    def inbox_get(self, key: str, scope: str, idem: str) -> None:
        self.both(lambda b: b.inbox.get(scope, key, idem))

    @rule(scope=SCOPES)
    def forget_scope(self, scope: str) -> None:
        self.both(lambda b: b.inbox.forget(scope))

    # --- log ---------------------------------------------------------------------------

    @rule(key=KEYS, version=st.integers(0, 3))
    def append_log(self, key: str, version: int) -> None:
        self.both(lambda b: b.log.append_next(key, entry("LOGGED", ts=2_000), version=version))

    @rule(key=KEYS, after=st.integers(0, 3), limit=st.one_of(st.none(), st.integers(1, 3)))
    def read_log(self, key: str, after: int, limit: int | None) -> None:
        self.both(lambda b: b.log.read(key, after_seq=after, limit=limit))

    # --- listing and timers ---------------------------------------------------------

    @rule(prefix=PREFIXES, machine=st.one_of(st.none(), MACHINES))
    def list_keys(self, prefix: str, machine: str | None) -> None:
        self.both(lambda b: list(b.store.list_keys(prefix, machine=machine)))

    @rule(
        prefix=PREFIXES,
        limit=st.integers(1, 3),
        machine=st.one_of(st.none(), MACHINES),
        state=st.one_of(st.none(), st.sampled_from(["order.cart", "order.paid"])),
    )
    def list_pages(self, prefix: str, limit: int, machine: str | None, state: str | None) -> None:
        def pages(b: Any) -> list[Any]:
            out, after = [], ""
            for _ in range(20):
                page, after = b.store.list_page(
                    prefix, after=after, limit=limit, machine=machine, state=state
                )
                out.append((page, after))
                if not after:
                    break
            return out

        every = self.mem.store.list_page(prefix, limit=10_000, machine=machine, state=state)[0]
        chunks = [every[i : i + limit] for i in range(0, len(every), limit)] or [[]]
        exact = [(c, c[-1] if i < len(chunks) - 1 else "") for i, c in enumerate(chunks)]
        assert pages(self.red) == exact
        self.both(pages)

    @rule(until=st.integers(999, 1_011), limit=st.integers(1, 4))
    def due_keys(self, until: int, limit: int) -> None:
        self.both(lambda b: b.store.due_keys(until / 1000, limit=limit))

    @rule(key=KEYS, drift=st.sampled_from([0, 1]), dead=st.booleans(), due=DUES)
    def record_timer_failure(self, key: str, drift: int, dead: bool, due: int | None) -> None:
        expected = self.version(key) + drift
        failures = {"x": TimerFailure(1, 2, dead=dead)}
        self.both(
            lambda b: b.store.record_timer_failure(
                key, expected_version=expected, failures=failures, next_due_ms=due
            )
        )

    @invariant()
    def dead_letters_agree(self) -> None:
        # parked times differ (a frozen FakeClock vs the server's): keys only
        self.both(lambda b: sorted(k for k, _ in b.store.dead_letters()))


# (examples, steps); XSM_STATEFUL_EXAMPLES raises the example count for a long hunt
BUDGET = {"fakeredis": (150, 40), "live": (25, 30)}


def _case(flavour: str) -> Any:
    machine = type(f"StoreComparison_{flavour}", (StoreComparison,), {"flavour": flavour})
    examples, steps = BUDGET[flavour]
    examples = int(os.environ.get("XSM_STATEFUL_EXAMPLES", examples))
    case = machine.TestCase
    case.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    return case


TestRedisMatchesMemoryOnFakeredis = _case("fakeredis")
TestRedisMatchesMemoryLive = pytest.mark.live(
    pytest.mark.skipif(not LIVE_URL, reason="XSM_REDIS_URL is not set")(_case("live"))
)
