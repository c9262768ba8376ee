"""The OUTBOX_* scripts called directly: each has its KEYS/ARGV/returns
header, each refuses a key of the wrong type before its first write, and
the driver's NOSCRIPT fallback covers them like every other script.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import redis.exceptions as rex

from django_xsm.redis import RedisOutbox, scripts
from django_xsm.redis.scripts import outbox as outbox_scripts
from tests.redis.helpers import layout_of, namespace_state, raw_script
from tests.redis.outbox_worker import BUCKETS, commit
from tests.support import Backends

NAMES = outbox_scripts.__all__

#: Plausible ARGV of each script (what RedisOutbox sends).
ARGS: dict[str, list[Any]] = {
    "OUTBOX_PROMOTE": ["xsm", 10, 1000, 10],
    "OUTBOX_RECLAIM": ["xsm", "w", 0, 10, 4],
    "OUTBOX_READ": ["xsm", "w", 10],
    "OUTBOX_ACK": ["xsm", "1-0", "w", 0],
    "OUTBOX_FAIL": ["xsm", "1-0", "w", 0, 1, "boom", ""],
    "OUTBOX_PENDING": ["xsm", 10],
    "OUTBOX_STATS": [],
    "OUTBOX_REDRIVE": ["1-0", "d-0"],
    "OUTBOX_REDRIVE_PAGE": ["-", 10],
    "OUTBOX_PURGE_DEAD": [9_999_999_999_999, 10, "0", "-"],
}
READ_ONLY = {"OUTBOX_PENDING", "OUTBOX_STATS"}


def test_every_outbox_script_is_registered_and_has_a_header() -> None:
    assert set(NAMES) <= set(scripts.__all__)
    assert set(ARGS) == set(NAMES)
    lines = inspect.getsource(outbox_scripts).splitlines()
    for name in NAMES:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
        head = []
        for line in reversed(lines[:at]):
            if not line.startswith("#"):
                break
            head.append(line)
        text = "\n".join(head)
        assert "KEYS[1]" in text, f"{name}: no KEYS in its header"
        assert "return" in text, f"{name}: no 'returns' in its header"


def _keys(b: Backends, name: str) -> list[str]:
    from django_xsm.redis.outbox_entries import _KEYS

    layout = layout_of(b.store)
    return [getattr(layout, method)(0) for method in _KEYS[name]]


@pytest.mark.parametrize("name", sorted(set(NAMES) - READ_ONLY))
def test_a_key_of_the_wrong_type_fails_the_script_before_any_write(b: Backends, name: str) -> None:
    layout = layout_of(b.store)
    ob = RedisOutbox(b.client, prefix=b.store.prefix, buckets=BUCKETS)
    ob.take("w")  # the groups exist
    b.client.zadd(layout.outbox_retry(0), {"d-0": 0})  # due: PROMOTE would move it
    b.client.hset(layout.outbox_waiting(0), "d-0", '["id", "d-0"]')
    keys = _keys(b, name)
    wrong = keys[-1]  # the last key of each script holds a string
    b.client.delete(wrong)
    b.client.set(wrong, "not mine")
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(rex.ResponseError, match="WRONGTYPE"):
        raw_script(b.client, name)(keys=keys, args=ARGS[name])
    assert namespace_state(b.client, b.store.prefix) == before


def test_ack_and_fail_of_an_unknown_entry_change_nothing(b: Backends) -> None:
    commit(b.store, "order:1", "PING")
    ob = RedisOutbox(b.client, prefix=b.store.prefix, buckets=BUCKETS)
    ob.take("w")
    before = namespace_state(b.client, b.store.prefix)
    assert (
        raw_script(b.client, "OUTBOX_ACK")(keys=_keys(b, "OUTBOX_ACK"), args=ARGS["OUTBOX_ACK"])
        == 0
    )
    fail = raw_script(b.client, "OUTBOX_FAIL")
    assert fail(keys=_keys(b, "OUTBOX_FAIL"), args=ARGS["OUTBOX_FAIL"]) == b"lost"
    assert namespace_state(b.client, b.store.prefix) == before


def test_after_a_script_flush_every_call_falls_back_to_eval(b: Backends, flavour: str) -> None:
    if flavour == "live":
        pytest.skip(
            "SCRIPT FLUSH empties the shared server's cache (the fault tests restart an own server)"
        )
    commit(b.store, "order:1", "PING")
    ob = RedisOutbox(b.client, prefix=b.store.prefix, buckets=BUCKETS)
    ob.take("w", count=1)
    b.client.script_flush()
    first, *_ = ob.take("w")
    assert ob.fail(first, "x", retry_at_ms=None) == "dead"
    b.client.script_flush()
    assert ob.stats()["dead"] == 1
    assert ob.redrive(first.entry.delivery_id)
