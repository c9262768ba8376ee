"""Client retries are safe (docs/redis.md, "Client retries"): a commit that reached the server but
whose reply was lost is recognised by its commit id when it is sent again,
and reported as success: never applied twice, never a conflict with itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.exceptions import ConflictError, InvalidConfigError
from django_xsm.persistence.records import ClaimRequest, InboxMark
from django_xsm.redis import calls
from tests.redis.helpers import (
    entry,
    layout_of,
    namespace_state,
    raw_script,
    snap,
    stored_value,
    unit,
)
from tests.support import Backends


def lost_reply(b: Backends, u: Any) -> None:
    """Run the commit on the server as the first attempt did; drop the reply."""
    data = None if u.snapshot is None else b.store.core.encode(u)
    call = calls.commit_call(layout_of(b.store), u, data, ttl_ms=0, log_maxlen=0)
    status = raw_script(b.client, "COMMIT")(keys=call.keys, args=call.args)[0]
    assert status == b"ok"


def full_unit(b: Backends, expected: int, idem: str, **kw: Any) -> Any:
    c = ClaimRequest("acct", "order:1", idem, "fp", "w", 60_000)
    b.inbox.claim(c)
    return unit(
        "order:1",
        expected,
        kw.pop("snapshot", snap(items=expected + 1)),
        marks=(InboxMark(c, {"idem": idem}, 60_000),),
        log_entries=(entry(f"E-{idem}"),),
        **kw,
    )


def test_a_commit_whose_reply_was_lost_is_reported_as_replayed(b: Backends) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    u = full_unit(b, 1, "a")
    lost_reply(b, u)
    after = namespace_state(b.client, b.store.prefix)
    result = b.store.commit(u, inbox=b.inbox, log=b.log)
    assert result.replayed and result.version == 2
    assert namespace_state(b.client, b.store.prefix) == after
    assert [r.event_type for r in b.log.read("order:1")] == ["E-a"]


def test_a_retry_after_another_writer_committed_is_still_replayed(b: Backends) -> None:
    """The retry can arrive after someone else loaded the new version and
    committed on top: it is still our commit, not a conflict (a conflict
    would make the caller reload and apply its event a second time)."""
    b.store.save("order:1", snap(), expected_version=0)
    mine = full_unit(b, 1, "mine")
    lost_reply(b, mine)
    theirs = b.store.commit(full_unit(b, 2, "theirs"), inbox=b.inbox, log=b.log)
    assert theirs.version == 3
    after = namespace_state(b.client, b.store.prefix)
    result = b.store.commit(mine, inbox=b.inbox, log=b.log)
    assert result.replayed and result.version == 2
    assert namespace_state(b.client, b.store.prefix) == after
    assert [(r.event_type, r.version) for r in b.log.read("order:1")] == [
        ("E-mine", 2),
        ("E-theirs", 3),
    ]


def test_recent_commit_ids_are_remembered_in_a_bounded_history(b: Backends) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    first = unit("order:1", 1, snap(items=1))
    assert b.store.commit(first).version == 2
    for v in range(2, 9):
        b.store.commit(unit("order:1", v, snap(items=v)))
    assert b.store.commit(first).replayed  # 7 commits later: still known
    for v in range(9, 12):
        b.store.commit(unit("order:1", v, snap(items=v)))
    with pytest.raises(ConflictError):  # too old to be a client retry
        b.store.commit(first)
    history = stored_value(b.client, layout_of(b.store).snapshot("order:1"), "cid")
    assert history is not None
    assert len(history.split()) == 8


def test_a_lost_reply_of_a_commit_without_snapshot_is_replayed(b: Backends) -> None:
    b.store.save("order:1", snap(), expected_version=0)
    u = full_unit(b, 1, "marks-only", snapshot=None)
    lost_reply(b, u)
    result = b.store.commit(u, inbox=b.inbox, log=b.log)
    assert result.replayed and result.version == 1
    assert len(b.log.read("order:1")) == 1


@pytest.mark.parametrize("bad", ["", "two words", "tab\there", "x" * 200, "nl\n"])
def test_unusable_commit_ids_are_refused_before_any_write(b: Backends, bad: str) -> None:
    before = namespace_state(b.client, b.store.prefix)
    with pytest.raises(InvalidConfigError):
        b.store.commit(unit("order:1", 0, snap(), commit_id=bad))
    assert namespace_state(b.client, b.store.prefix) == before
