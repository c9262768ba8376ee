"""The backend: the store, inbox, log, plugins and Redis clients a process
uses, built once from ``settings.XSM`` (:mod:`.build`; clients in
:mod:`.clients`, settings checks in :mod:`.readiness`, signals and log
lines in :mod:`.transitions`).

::

    from django_xsm.backend import get_backend
    get_backend().store.health()
"""

from .build import (
    AsyncBackend,
    Backend,
    BlockPlugin,
    MachineDirectory,
    clock_is_set,
    get_async_backend,
    get_backend,
    get_codec,
    get_inbox,
    get_log,
    get_outbox,
    get_scanner,
    get_store,
    lock_strategy,
    new_client,
    now_ms,
    reset,
    use_clock,
    use_machines,
)

__all__ = [
    "AsyncBackend",
    "Backend",
    "BlockPlugin",
    "MachineDirectory",
    "clock_is_set",
    "get_async_backend",
    "get_backend",
    "get_codec",
    "get_inbox",
    "get_log",
    "get_outbox",
    "get_scanner",
    "get_store",
    "lock_strategy",
    "new_client",
    "now_ms",
    "reset",
    "use_clock",
    "use_machines",
]
