"""Hostile values the fuzzers found (issue 21), on every backend (memory,
fakeredis, live): nothing was ever half written, but the errors were raw
``RecursionError``, ``ValueError``, ``TypeError`` or ``OverflowError``.
Each is now the documented ``XsmError`` with a bounded message, raised
before any write."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from django_xsm.exceptions import (
    ArgumentTypeError,
    DataTooDeepError,
    InvalidConfigError,
    PayloadTooLargeError,
    SnapshotCorruptError,
    UnstorableValueError,
    XsmError,
)
from django_xsm.persistence import (
    AuditPlugin,
    DueTimerScanner,
    IdempotencyPlugin,
    PessimisticLock,
    persisted,
)
from django_xsm.persistence.idempotency import event_fingerprint
from django_xsm.persistence.records import MAX_VERSION
from tests.engine.test_hardening import NASTY
from tests.persistence.conftest import block_clock
from tests.persistence.test_persisted import state_of
from tests.support import Backends, order_machine, snap, timer_machine

M = order_machine()
T = timer_machine()
HUGE = 10**5000  # past Python's 4300-digit int-to-text limit


def _case(value: Any) -> str:
    """A short test id (pytest's own would print a 5000-digit int)."""
    return type(value).__name__


def nested(depth: int) -> Any:
    """Lists nested ``depth`` levels (the outermost is level 1)."""
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def deep_tuple(depth: int = 3000) -> Any:
    value: Any = ()
    for _ in range(depth):
        value = (value,)
    return value


def _plugins(b: Backends) -> list[Any]:
    return [IdempotencyPlugin(b.inbox, principal=lambda e: "acct"), AuditPlugin(b.log)]


# --- deep values: one depth rule (the engine's 100 levels) ---------------------------


def test_the_fingerprint_of_a_990_deep_payload_is_too_deep_not_a_recursion_error() -> None:
    with pytest.raises(DataTooDeepError) as err:
        event_fingerprint("ADD", {"x": nested(990)})
    assert err.value.path == "$.payload" and err.value.limit == 100
    assert isinstance(err.value, UnstorableValueError) and isinstance(err.value, InvalidConfigError)
    # the payload dict is level 1: 99 more levels are the limit, not an error
    assert event_fingerprint("ADD", {"x": nested(99)}) != event_fingerprint("ADD", {"x": 1})
    with pytest.raises(DataTooDeepError):
        event_fingerprint("ADD", {"x": nested(100)})


def test_a_keyed_send_with_a_deep_payload_is_refused_before_its_claim(b: Backends) -> None:
    with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:
        o.send("ADD")
    before = state_of(b, "order:1")
    with pytest.raises(DataTooDeepError):
        with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:
            o.send("ADD", idempotency_key="evt-1", x=nested(990))
    assert state_of(b, "order:1") == before
    with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:  # the key is free
        assert o.send("ADD", idempotency_key="evt-1").accepted


@pytest.mark.parametrize("depth", [101, 990, 5000])
def test_set_result_of_deep_data_is_refused_and_the_block_writes_nothing(
    b: Backends, depth: int
) -> None:
    with pytest.raises(DataTooDeepError) as err:
        with persisted(b.store, "order:1", M, plugins=_plugins(b), idempotency_key="k") as o:
            o.send("ADD")
            o.set_result(nested(depth))
    assert err.value.path == "$.result"
    assert b.store.load("order:1") is None
    with persisted(b.store, "order:1", M, plugins=_plugins(b), idempotency_key="k") as o:
        assert not o.duplicate  # nothing was recorded under the key
        o.send("ADD")
        o.set_result(nested(100))
    with persisted(b.store, "order:1", M, plugins=_plugins(b), idempotency_key="k") as o:
        assert o.duplicate and o.replayed_result == nested(100)


# --- ints Python will not turn into text ---------------------------------------------


def test_a_huge_int_in_the_context_names_its_path(b: Backends) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M) as o:
            o.context["n"] = HUGE
            o.send("ADD")
    assert err.value.path == "$.context.n"
    assert "5001 digits" in str(err.value) and len(str(err.value)) < 300
    assert b.store.load("order:1") is None


def test_a_huge_int_in_a_logged_payload_names_its_path(b: Backends) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M, plugins=[AuditPlugin(b.log)]) as o:
            o.send("ADD", sizes=[1, -HUGE])
    assert err.value.path == "$.payload.sizes[1]"
    assert b.store.load("order:1") is None and b.log.read("order:1") == []


def test_a_huge_int_in_an_idempotent_result_names_its_path(b: Backends) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M, plugins=_plugins(b), idempotency_key="k") as o:
            o.send("ADD")
            o.set_result({"total": HUGE})
    assert err.value.path == "$.result.total"
    assert b.store.load("order:1") is None


def test_a_keyed_send_with_a_huge_int_names_its_path(b: Backends) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:
            o.send("ADD", idempotency_key="evt-1", n=HUGE)
    assert err.value.path == "$.payload.n"
    assert b.store.load("order:1") is None


def test_ints_up_to_the_limit_are_stored_exactly(b: Backends) -> None:
    big = 10**4299  # 4300 digits: the most Python converts by default
    with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:
        o.context["n"] = -big
        o.send("ADD", n=0, big=big)
    assert b.store.load("order:1").snapshot["context"]["n"] == -big
    assert b.log.read("order:1")[0].payload["big"] == big


# --- wrong argument types ------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda b: b.log.read("order:1", after_seq="1"), "after_seq"),
        (lambda b: b.log.read("order:1", after_seq=1.5), "after_seq"),
        (lambda b: b.log.read("order:1", after_seq=-1), "after_seq"),
        (lambda b: b.log.read("order:1", limit=deep_tuple()), "limit"),
        (lambda b: b.log.read_last("order:1", count="5"), "count"),
        (lambda b: b.store.list_page("\ud800"), "prefix"),
        (lambda b: b.store.list_page(after="a\udc00"), "after"),
        (lambda b: b.store.list_page(state="\ud800"), "state"),
        (lambda b: b.store.list_page(machine="\ud800"), "machine"),
        (lambda b: list(b.store.list_keys("order:\ud800")), "prefix"),
        (lambda b: b.store.list_page(limit=deep_tuple()), "limit"),
        (lambda b: b.store.due_keys(math.inf), "until_wall"),
        (lambda b: b.store.due_keys(-math.inf), "until_wall"),
        (lambda b: b.store.due_keys(math.nan), "until_wall"),
        (lambda b: b.store.due_keys(HUGE), "until_wall"),
        (lambda b: b.store.due_keys(0, prefix="\ud800"), "prefix"),
        (lambda b: persisted(b.store, "order:1", M, lock=deep_tuple()), "lock"),
    ],
)
def test_wrong_arguments_are_the_documented_error_with_a_bounded_message(
    b: Backends, call: Any, path: str
) -> None:
    with pytest.raises(InvalidConfigError) as err:
        call(b)
    assert err.value.path == path
    assert len(str(err.value)) < 400


def test_a_context_key_that_is_a_3000_deep_tuple_names_the_context(b: Backends) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M) as o:
            o.context[deep_tuple()] = 1
            o.send("ADD")
    assert err.value.path == "$.context" and len(str(err.value)) < 400
    assert b.store.load("order:1") is None


@pytest.mark.parametrize("version", [MAX_VERSION, 2**64, HUGE], ids=_case)
def test_a_stored_version_beyond_what_a_script_counts_is_corrupt(b: Backends, version: int) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    layout = b.store.layout or b.store.driver.run(b.store.core.state.ensure())
    b.client.hset(layout.snapshot("order:1"), "v", str(version) if version < HUGE else "9" * 5000)
    with pytest.raises(SnapshotCorruptError) as err:
        with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:
            o.send("ADD")
    assert err.value.key == "order:1"
    with pytest.raises(SnapshotCorruptError):
        b.store.load("order:1")
    b.client.hset(layout.snapshot("order:1"), "v", str(MAX_VERSION - 1))
    assert b.store.load("order:1").version == MAX_VERSION - 1


def test_every_error_above_is_an_xsm_error() -> None:
    """The handlers a caller writes (``except XsmError``) catch them all."""
    for cls in (DataTooDeepError, UnstorableValueError, ArgumentTypeError, SnapshotCorruptError):
        assert issubclass(cls, XsmError)


# --- max_payload_bytes: refused before the send's I/O -------------------------------


def test_a_payload_over_max_payload_bytes_is_refused_before_its_claim(b: Backends) -> None:
    with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:
        o.send("ADD")
    before = state_of(b, "order:1")
    # {"note":"..."}: 11 bytes around the text
    with persisted(b.store, "order:1", M, plugins=_plugins(b), max_payload_bytes=100) as o:
        o.send("ADD", note="a" * 89)  # exactly 100 bytes: accepted
        with pytest.raises(PayloadTooLargeError) as err:
            o.send("ADD", idempotency_key="evt-1", note="é" * 45)  # 101 bytes of UTF-8
        assert (err.value.size, err.value.limit, err.value.event_type) == (101, 100, "ADD")
        assert "101 bytes, over the limit of 100" in str(err.value)
        o.send("ADD")  # a refused payload does not spoil the block
    assert b.store.load("order:1").snapshot["context"]["items"] == 3
    assert [r.payload for r in b.log.read("order:1")][1:] == [{"note": "a" * 89}, {}]
    assert state_of(b, "order:1") != before
    with persisted(b.store, "order:1", M, plugins=_plugins(b)) as o:  # evt-1 was never claimed
        assert o.send("ADD", idempotency_key="evt-1").accepted


def test_a_block_that_sends_only_a_refused_payload_writes_nothing(b: Backends) -> None:
    with pytest.raises(PayloadTooLargeError):
        with persisted(b.store, "order:1", M, plugins=_plugins(b), max_payload_bytes=10) as o:
            o.send("ADD", note="x" * 10)
    assert state_of(b, "order:1") == (None, [], [])


def test_with_a_limit_a_payload_must_be_storable_to_be_measured(b: Backends) -> None:
    with pytest.raises(UnstorableValueError) as err:
        with persisted(b.store, "order:1", M, max_payload_bytes=1000) as o:
            o.send("ADD", tags={1, 2})
    assert err.value.path == "$.payload.tags"
    with pytest.raises(DataTooDeepError):
        with persisted(b.store, "order:1", M, max_payload_bytes=1000) as o:
            o.send("ADD", d=nested(100))
    with persisted(b.store, "order:1", M) as o:  # no limit (the default): not measured
        o.send("ADD", tags={1, 2})
    assert b.store.load("order:1").snapshot["context"]["items"] == 1


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "65536", deep_tuple()], ids=_case)
def test_max_payload_bytes_is_none_or_a_positive_int(b: Backends, value: Any) -> None:
    with pytest.raises(InvalidConfigError) as err:
        persisted(b.store, "order:1", M, max_payload_bytes=value)
    assert err.value.path == "max_payload_bytes" and len(str(err.value)) < 300


# --- a damaged due index never stops a scan -------------------------------------------


def _waiting(b: Backends, key: str) -> int:
    with persisted(b.store, key, T) as t:
        t.send("POKE")
        return int(t.deadlines[0].due_ms)


def test_a_due_entry_scored_minus_inf_is_parked_and_the_scan_goes_on(
    b: Backends, caplog: pytest.LogCaptureFixture
) -> None:
    """Something wrote ``ZADD due -inf key``: every scan read that entry
    first and died on it (OverflowError), so no timer of the namespace
    fired again. It is skipped with a WARNING naming it and parked (listed
    with its reason); the other timers fire; a commit re-indexes it."""
    clock = block_clock(b)
    due = max(_waiting(b, k) for k in ("t:bad", "t:good"))
    layout = b.store.layout or b.store.driver.run(b.store.core.state.ensure())
    b.client.zadd(layout.due(layout.bucket("t:bad")), {"t:bad": float("-inf")})
    assert [k for k, _ in b.store.due_keys(due / 1000)] == ["t:good"]
    [warning] = [r for r in caplog.records if r.name == "django_xsm.timers"]
    assert warning.levelname == "WARNING" and "'t:bad'" in warning.getMessage()
    assert "-inf" in warning.getMessage()
    assert [k for k, _ in b.store.dead_letters()] == ["t:bad"]
    assert "-inf, not a time" in b.store.dead_letter_reasons(["t:bad"])["t:bad"]
    result = DueTimerScanner(b.store, {"timer": T}, now=clock).scan(now=due)
    assert (result.scanned, result.fired) == (1, 1)
    # repaired by any commit: the admin's "fire now" (force) re-indexes it
    fired = DueTimerScanner(b.store, {"timer": T}, now=clock).fire("t:bad", now=due, force=True)
    assert fired.fired == 1 and b.store.dead_letters() == []
    assert b.store.load("t:bad").snapshot["value"] == "expired"


def test_damaged_due_entries_cost_one_pass_not_every_scan(
    b: Backends, caplog: pytest.LogCaptureFixture
) -> None:
    clock = block_clock(b)
    keys = [f"t:{i}" for i in range(5)]
    due = max(_waiting(b, k) for k in [*keys, "t:good"])
    layout = b.store.layout or b.store.driver.run(b.store.core.state.ensure())
    for key in keys:
        b.client.zadd(layout.due(layout.bucket(key)), {key: float("-inf")})
    scanner = DueTimerScanner(b.store, {"timer": T}, now=clock)
    first = scanner.scan(now=due, limit=5)
    assert (first.scanned, first.fired) == (1, 1)
    assert sorted(k for k, _ in b.store.dead_letters()) == keys
    caplog.clear()
    assert scanner.scan(now=due + 10**6, limit=5).scanned == 0  # parked: not read again
    assert not [r for r in caplog.records if r.name == "django_xsm.timers"]


# --- any value, any argument: the documented error, bounded ---------------------------

_ARGUMENTS: dict[str, Any] = {
    "list_page(limit=)": lambda b, v: b.store.list_page(limit=v),
    "list_page(prefix=)": lambda b, v: b.store.list_page(v),
    "dead_letters(limit=)": lambda b, v: b.store.dead_letters(limit=v),
    "due_keys(until_wall)": lambda b, v: b.store.due_keys(v),
    "due_keys(limit=)": lambda b, v: b.store.due_keys(0, limit=v),
    "load(key)": lambda b, v: b.store.load(v),
    "read(after_seq=)": lambda b, v: b.log.read("order:1", after_seq=v),
    "read(limit=)": lambda b, v: b.log.read("order:1", limit=v),
    "read_last(count=)": lambda b, v: b.log.read_last("order:1", count=v),
    "PessimisticLock(timeout=)": lambda b, v: PessimisticLock(timeout=v),
    "PessimisticLock(ttl_ms=)": lambda b, v: PessimisticLock(ttl_ms=v),
    "persisted(lock=)": lambda b, v: persisted(b.store, "order:1", M, lock=v),
    "persisted(actor=)": lambda b, v: persisted(b.store, "order:1", M, actor=v),
    "persisted(max_payload_bytes=)": lambda b, v: persisted(
        b.store, "order:1", M, max_payload_bytes=v
    ),
    "IdempotencyPlugin(ttl_s=)": lambda b, v: IdempotencyPlugin(b.inbox, ttl_s=v),
    "Instance.matches": lambda b, v: M.start().matches(v),
    "event_fingerprint(payload)": lambda b, v: event_fingerprint("ADD", {"v": v}),
}


def _accepted_or_documented(b: Backends, name: str, value: Any) -> None:
    """Never RecursionError, a digit-limit ValueError or OverflowError while
    the value is checked or its message built: an XsmError of at most a few
    hundred characters (or the value is fine)."""
    try:
        _ARGUMENTS[name](b, value)
    except XsmError as exc:
        assert len(str(exc)) < 600, (name, str(exc)[:200])


@pytest.mark.parametrize("name", sorted(_ARGUMENTS))
@pytest.mark.parametrize(
    "value",
    [HUGE, -HUGE, 2**63, math.nan, math.inf, deep_tuple(), [deep_tuple()], "\ud800", b"x"],
    ids=_case,
)
def test_nasty_values_of_every_argument_are_the_documented_error(
    bl: Backends, name: str, value: Any
) -> None:
    """(Checked before any I/O: memory and fakeredis suffice.)"""
    _accepted_or_documented(bl, name, value)


@pytest.mark.parametrize("name", sorted(_ARGUMENTS))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=NASTY)
def test_any_value_of_any_argument_is_accepted_or_the_documented_error(
    bl: Backends, name: str, value: Any
) -> None:
    _accepted_or_documented(bl, name, value)
