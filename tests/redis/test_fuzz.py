"""Property-based tests (hypothesis, bounded) of stored records and store
arguments on fakeredis: random bytes and hash fields planted at a record's
key make ``load`` / ``open`` / a block raise SnapshotCorruptError (or
SnapshotTooLargeError) or work, never another error; random prefixes, TTLs
and limits are accepted or refused with InvalidConfigError."""

from __future__ import annotations

import json
from typing import Any

import fakeredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_xsm.exceptions import (
    InvalidConfigError,
    MigrationError,
    SnapshotCorruptError,
    SnapshotTooLargeError,
)
from django_xsm.persistence import persisted
from django_xsm.persistence.records import OpenRequest
from django_xsm.redis import RedisStore
from tests.support import order_machine

M = order_machine()
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SERVER = fakeredis.FakeServer()
STORE = RedisStore(fakeredis.FakeRedis(server=SERVER), prefix="fuzz", buckets=2)
KEY = "order:1"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
tags = st.fixed_dictionaries(
    {
        "$xsm": st.sampled_from(
            ["uuid", "bytes", "decimal", "datetime", "date", "time", "tuple", "dict", "x"]
        )
        | json_values,
        "v": json_values,
    }
)
snapshot_bytes = (
    st.binary(max_size=64)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(
        st.sampled_from(["value", "context", "deadlines", "machine_id"]), json_values | tags
    ).map(lambda v: json.dumps(v).encode())
    | st.integers(1, 3000).map(lambda n: b'{"context":' + b"[" * n + b"]" * n + b"}")
)
field_values = st.binary(max_size=24) | st.integers().map(lambda n: str(n).encode())
timer_fields = json_values.map(lambda v: json.dumps(v).encode()) | st.dictionaries(
    st.text(max_size=4),
    st.fixed_dictionaries({"attempts": json_values, "next_attempt_ms": json_values}),
    max_size=2,
).map(lambda v: json.dumps(v).encode())
random_records = st.fixed_dictionaries(
    {},
    optional={
        "d": snapshot_bytes,
        "v": field_values,
        "u": field_values,
        "m": field_values,
        "mv": field_values,
        "tf": timer_fields,
        "cid": field_values,
    },
)
# Records that are nearly right (a decodable object, a valid version), so
# the damage sits in one field: a tag, the update time, the timer failures.
near_valid = st.fixed_dictionaries(
    {
        "d": st.dictionaries(st.just("context"), tags | json_values, min_size=1).map(
            lambda v: json.dumps(v).encode()
        ),
        "v": st.just(b"1"),
    },
    optional={"u": st.integers().map(lambda n: str(n).encode()), "tf": timer_fields},
)
records = random_records | near_valid

ALLOWED = (SnapshotCorruptError, SnapshotTooLargeError)


@FUZZ
@given(fields=records)
def test_a_planted_record_reads_or_is_snapshot_corrupt(fields: dict[str, bytes]) -> None:
    client = STORE.client
    layout = STORE.layout or STORE.driver.run(STORE.core.state.ensure())
    client.delete(layout.snapshot(KEY))
    if fields:
        client.hset(layout.snapshot(KEY), mapping=fields)
    for call in (lambda: STORE.load(KEY), lambda: STORE.open(OpenRequest(KEY))):
        try:
            record = call()
        except ALLOWED as exc:
            assert exc.key == KEY
            continue
        if record is not None:
            record = getattr(record, "record", record)
        if record is not None:
            record.updated_at  # noqa: B018 - must not raise
            dict(record.timer_failures)
    try:
        with persisted(STORE, KEY, M) as order:
            order.value  # noqa: B018
    except (*ALLOWED, MigrationError, InvalidConfigError):
        pass  # a readable snapshot of another shape: refused by the engine's checks


@FUZZ
@given(
    prefix=st.text(max_size=70) | st.binary(max_size=8) | st.integers(),
    ttl_s=st.none() | st.floats(allow_nan=True) | st.integers(-3, 10**20) | st.text(max_size=3),
    limit=st.integers(-3, 10**9) | st.floats() | st.booleans() | st.none(),
)
def test_random_store_arguments_are_accepted_or_refused_as_config_errors(
    prefix: Any, ttl_s: Any, limit: Any
) -> None:
    client = fakeredis.FakeRedis(server=SERVER)
    try:
        store = RedisStore(client, prefix=prefix, ttl_s=ttl_s, max_snapshot_bytes=limit)
    except InvalidConfigError as exc:
        assert exc.path in {"prefix", "ttl_s", "max_snapshot_bytes"}
        return
    assert not prefix.endswith(":") and "\n" not in prefix
    assert store.ttl_s is None or store.ttl_s >= 0.001
    assert store.load("k") is None
