"""xsm_purge_inbox: removes expired idempotency rows only, at a cost that
grows with what expired (counted on the server), --limit, --dry-run."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm import backend as stores
from django_xsm import operations
from tests.django.commands.conftest import mark_rows, run, wait_for
from tests.redis.helpers import layout_of

HOUR_MS = 3_600_000


@pytest.fixture
def rows(backend: Any) -> dict[str, Any]:
    """1000 live rows over 50 instances and 3 scopes, and 3 expired ones."""
    live = [
        (("", "alice", "bob")[n % 3], f"order:{n % 50}", f"idem-{n}", HOUR_MS) for n in range(1000)
    ]
    expired = [("alice", "order:1", "old-1", 1), ("", "order:2", "old-2", 1), ("bob", "x", "o", 1)]
    mark_rows(live + expired)
    inbox = stores.get_inbox()
    wait_for(lambda: inbox.count_expired() == 3, what="3 rows to expire")
    return {"inbox": inbox, "live": live, "expired": expired}


def present(inbox: Any, row: tuple[str, str, str, int]) -> bool:
    scope, key, idem, _ttl = row
    layout = layout_of(stores.get_store())
    return bool(inbox.client.hexists(layout.inbox(scope, key), layout.inbox_field(key, idem)))


def test_removes_expired_rows_only(rows: dict[str, Any]):
    out = run("xsm_purge_inbox").out
    assert out == "Removed 3 expired idempotency row(s)\n"
    inbox = rows["inbox"]
    assert not any(present(inbox, r) for r in rows["expired"])
    assert all(present(inbox, r) for r in rows["live"][::97])
    assert inbox.get("alice", "order:1", "idem-1") is not None
    assert run("xsm_purge_inbox").out == "No expired idempotency rows\n"


def test_cost_grows_with_the_expired_rows_not_the_total(rows: dict[str, Any], backend: Any, trace):
    with trace(backend.store.prefix) as seen:
        assert operations.purge_inbox() == 3
    names = seen.names()
    assert names.count("HDEL") == 3, names
    assert names.count("ZREM") == 3, names
    # Nothing read or walked the rows: only the expiry index, by score.
    assert set(names) <= {"ZRANGEBYSCORE", "HDEL", "ZREM"}, set(names)
    if not seen.live:  # fakeredis also shows the replies: 3 members read in all
        assert sum(len(c.reply) for c in seen.calls if c.name == "ZRANGEBYSCORE") == 3


def test_dry_run_counts_and_touches_no_row(rows: dict[str, Any], backend: Any, trace):
    with trace(backend.store.prefix) as seen:
        out = run("xsm_purge_inbox", "--dry-run").out
    assert out == "Would remove 3 expired idempotency row(s) (dry run: nothing removed)\n"
    assert set(seen.names()) == {"ZCOUNT"}
    assert all(present(rows["inbox"], r) for r in rows["expired"])


def test_limit(rows: dict[str, Any]):
    out = run("xsm_purge_inbox", "--limit", "2").out
    assert out == (
        "Removed 2 expired idempotency row(s)\n"
        "the --limit of 2 was reached; more may have expired\n"
    )
    assert run("xsm_purge_inbox", "--dry-run", "--limit", "2").out.startswith("Would remove 1 ")
    assert run("xsm_purge_inbox", "--limit", "2").out == "Removed 1 expired idempotency row(s)\n"
    assert operations.purge_inbox() == 0


def test_verbosity_zero(rows: dict[str, Any]):
    assert run("xsm_purge_inbox", "-v", "0").out == ""
    assert operations.purge_inbox(dry_run=True) == 0


def test_batches(rows: dict[str, Any]):
    assert rows["inbox"].purge_expired(limit=None, batch=1) == 3


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--limit", "0"], "Invalid --limit 0: give a whole number from 1 to 10000000"),
        (["--limit", "many"], "Invalid --limit 'many'"),
        (["--limit", "10000001"], "Invalid --limit 10000001"),
        (["--older-than", "1d"], "unrecognized arguments: --older-than 1d"),
    ],
)
def test_bad_arguments(backend: Any, args: list[str], fragment: str):
    with pytest.raises(CommandError) as info:
        run("xsm_purge_inbox", *args)
    assert fragment in str(info.value)
