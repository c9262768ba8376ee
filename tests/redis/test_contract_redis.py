"""The shared contract on Redis: fakeredis (with lupa) and a live server."""

from __future__ import annotations

import pytest

from tests.persistence.contract import (
    CommitContract,
    InboxContract,
    LogContract,
    StoreContract,
)
from tests.persistence.contract_maintenance import MaintenanceContract

live = pytest.mark.live


class TestFakeRedisStore(StoreContract):
    flavour = "fakeredis"


class TestFakeRedisInbox(InboxContract):
    flavour = "fakeredis"


class TestFakeRedisLog(LogContract):
    flavour = "fakeredis"


class TestFakeRedisCommit(CommitContract):
    flavour = "fakeredis"


@live
class TestLiveRedisStore(StoreContract):
    flavour = "live"


@live
class TestLiveRedisInbox(InboxContract):
    flavour = "live"


@live
class TestLiveRedisLog(LogContract):
    flavour = "live"


@live
class TestLiveRedisCommit(CommitContract):
    flavour = "live"


class TestFakeRedisMaintenance(MaintenanceContract):
    flavour = "fakeredis"


@live
class TestLiveRedisMaintenance(MaintenanceContract):
    flavour = "live"
