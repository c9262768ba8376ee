"""The shared contract on MemoryStore, MemoryInbox and MemoryLog (the Redis
backends on an in-process fakeredis, built as a user builds them)."""

from __future__ import annotations

from tests.persistence.contract import (
    CommitContract,
    InboxContract,
    LogContract,
    StoreContract,
)
from tests.persistence.contract_maintenance import MaintenanceContract


class TestMemoryStore(StoreContract):
    flavour = "memory"


class TestMemoryInbox(InboxContract):
    flavour = "memory"


class TestMemoryLog(LogContract):
    flavour = "memory"


class TestMemoryCommit(CommitContract):
    flavour = "memory"


class TestMemoryMaintenance(MaintenanceContract):
    flavour = "memory"
