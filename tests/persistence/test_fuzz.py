"""Property-based tests (hypothesis, bounded) of snapshots, contexts and
store arguments on every backend: random JSON-ish payloads and contexts
sent through ``persisted()`` commit and read back equal, or raise an
XsmError that is also a ValueError or TypeError and write nothing; random
keys, TTLs and limits are accepted or refused with InvalidConfigError."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from django_xsm.exceptions import InvalidConfigError, XsmError
from django_xsm.persistence import AuditPlugin, MemoryStore, persisted, redact
from django_xsm.persistence.arguments import validate_key
from tests.support import Backends, order_machine

M = order_machine()
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

text = st.text(alphabet=st.characters(codec=None), max_size=12)  # lone surrogates included
scalars = st.none() | st.booleans() | st.integers() | st.floats() | text
jsonish = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(text | st.integers(), inner, max_size=4)
        | st.tuples(inner)
    ),
    max_leaves=12,
)


def _clean(value: Any) -> bool:
    """True when JsonCodec can hold ``value`` exactly."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and _clean(k) and _clean(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_clean(v) for v in value)
    return True


def _refused_cleanly(exc: BaseException) -> bool:
    return isinstance(exc, XsmError) and isinstance(exc, ValueError | TypeError)


@FUZZ
@given(
    context=st.dictionaries(text, jsonish, max_size=4),
    payload=st.dictionaries(text, jsonish, max_size=3),
)
# found by hypothesis: an int-keyed dict under a redacted field never reaches the log
@example(context={}, payload={"PASSWD": {0: None}})
def test_random_contexts_and_payloads_commit_and_read_back_or_are_refused(
    b: Backends, context: dict[str, Any], payload: dict[str, Any]
) -> None:
    key = "fuzz:1"
    b.store.forget(key)
    b.log.forget(key)
    try:
        with persisted(b.store, key, M, plugins=[AuditPlugin(b.log)]) as o:
            o.context.update(context)
            o.send({"type": "NOOP", "data": payload})
            wanted = dict(o.context)
    except Exception as exc:
        assert _refused_cleanly(exc), repr(exc)
        assert b.store.load(key) is None and b.log.read(key) == []
        return
    # the log stores the payload redacted (a "passwd" field's value is
    # replaced), so only what survives redaction must be storable
    assert _clean(context) and _clean(redact(payload))
    assert dict(b.store.load(key).snapshot["context"]) == wanted


@FUZZ
@given(key=st.text(alphabet=st.characters(codec=None), max_size=600) | st.binary() | st.integers())
def test_random_keys_are_usable_everywhere_or_refused_before_any_io(b: Backends, key: Any) -> None:
    try:
        validate_key(key)
    except InvalidConfigError:
        for call in (lambda: b.store.load(key), lambda: b.store.lock_holder(key)):
            with pytest.raises(InvalidConfigError):
                call()
        return
    assert b.store.load(key) is None
    with persisted(b.store, key, M) as o:
        o.send("ADD")
    assert b.store.load(key).version == 1
    assert key in b.store.machine_ids([key])
    b.store.forget(key)


@FUZZ
@given(
    ttl_s=st.none() | st.floats(allow_nan=True) | st.integers(-5, 10**20) | st.booleans() | text,
    limit=st.integers(-3, 10**7) | st.floats() | st.none() | st.booleans() | text,
)
def test_random_ttls_and_limits_are_accepted_or_refused_as_config_errors(
    ttl_s: Any, limit: Any
) -> None:
    for build in (lambda: MemoryStore(ttl_s=ttl_s), lambda: MemoryStore(max_snapshot_bytes=limit)):
        try:
            store = build()
        except InvalidConfigError:
            continue
        assert store.ttl_s is None or store.ttl_s >= 0.001
        assert isinstance(store.max_snapshot_bytes, int) and store.max_snapshot_bytes >= 1
    store = MemoryStore()
    for call in (lambda: store.dead_letters(limit=limit), lambda: store.list_page(limit=limit)):
        try:
            call()
        except InvalidConfigError as exc:
            assert exc.path == "limit"
