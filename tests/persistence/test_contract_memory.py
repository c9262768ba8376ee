"""The shared contract on the in-memory reference backends."""

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
