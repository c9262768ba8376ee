"""The maintenance part of the contract (``StateStore.machine_ids``, the
inbox's ``count_expired`` / ``purge_expired`` / ``count_for_instance`` /
``forget_instance``, the log's ``count_older_than``), run by every backend
like the classes of ``contract.py`` (kept apart so neither module passes
~400 lines)."""

from __future__ import annotations

import pytest

from django_xsm.exceptions import InvalidConfigError
from tests.persistence.contract import _Base, claim, entry, snap, unit
from tests.support import Backends


class MaintenanceContract(_Base):
    def test_machine_ids_name_each_records_machine_and_blank_for_no_record(
        self, b: Backends
    ) -> None:
        b.store.commit(unit("k1", 0, snap()))
        b.store.commit(unit("k2", 0, snap(), machine_id="other"))
        b.store.commit(unit("k3", 0, snap(), machine_id=""))  # named by its snapshot
        b.store.save("k4", snap(), expected_version=0)
        b.store.delete("k4")
        found = b.store.machine_ids(["k1", "k2", "k3", "k4", "k5"])
        assert found == {"k1": "order", "k2": "other", "k3": "order", "k4": "", "k5": ""}
        assert b.store.machine_ids([]) == {}

    def test_purge_expired_limit_caps_the_total(self, b: Backends) -> None:
        for i in range(6):
            b.inbox.claim(claim(instance=f"order:{i}", lease_ms=50))
        b.inbox.claim(claim(instance="order:kept", lease_ms=60_000))
        b.pass_time(100)
        assert b.inbox.count_expired() == 6
        assert b.inbox.count_expired() == 6  # counting removes nothing
        assert b.inbox.purge_expired(limit=4) == 4
        assert b.inbox.count_expired() == 2
        assert b.inbox.purge_expired(limit=None) == 2
        assert b.inbox.count_expired() == 0
        assert b.inbox.get("acct", "order:kept", "k1") is not None

    @pytest.mark.parametrize("limit", [0, -3, True, 2.5])
    def test_purge_expired_refuses_a_limit_that_is_not_a_positive_int(
        self, b: Backends, limit: object
    ) -> None:
        with pytest.raises(InvalidConfigError):
            b.inbox.purge_expired(limit=limit)

    def test_forget_instance_removes_its_rows_in_every_scope_and_nothing_else(
        self, b: Backends
    ) -> None:
        for scope in ("", "s1", "s*"):
            b.inbox.claim(claim(scope=scope, instance="order:1"))
        b.inbox.claim(claim("k2", scope="s1", instance="order:1"))
        for neighbour in ("order:10", "order:*", "xorder:1"):
            b.inbox.claim(claim(scope="s1", instance=neighbour))
        assert b.inbox.count_for_instance("order:1") == 4
        assert b.inbox.count_for_instance("order:1") == 4  # counting removes nothing
        assert b.inbox.forget_instance("order:1") == 4
        assert b.inbox.count_for_instance("order:1") == 0
        assert b.inbox.get("s*", "order:1", "k1") is None
        for neighbour in ("order:10", "order:*", "xorder:1"):
            assert b.inbox.get("s1", neighbour, "k1") is not None
        assert b.inbox.forget_instance("order:*") == 1
        assert b.inbox.count_for_instance("order:10") == 1

    def test_count_older_than_is_what_purge_older_than_removes(self, b: Backends) -> None:
        base = 1_800_000_000_000
        for i in range(6):
            b.log.append_next("k", entry(ts=base + i * 1000), version=1)
        b.log.append_next("j", entry(ts=base), version=1)
        cutoff = (base + 3500) / 1000
        assert b.log.count_older_than(cutoff, key="k") == 4
        assert b.log.count_older_than(cutoff) == 5
        assert [r.seq for r in b.log.read("k")] == [1, 2, 3, 4, 5, 6]  # nothing removed
        assert b.log.purge_older_than(cutoff) == 5
        assert b.log.count_older_than(cutoff) == 0
