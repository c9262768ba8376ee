"""Operations on stored instances, shared by the ``xsm_*`` management
commands and the admin, as functions tests call directly: inspect and
forget one instance (:mod:`.instances`), due and dead-lettered timers and
the scan loop (:mod:`.timers`), purges of old log records and expired
idempotency rows (:mod:`.retention`).

Everything runs on the process backend (:mod:`django_xsm.backend`) and
raises the library's own errors (``StoreUnavailableError``,
``UnknownMachineError``, ``InstanceNotFoundError``).
"""

from .instances import forget_instance, forget_preview, inspect_instance, iso, redacted
from .retention import PurgeReport, purge_inbox, purge_logs
from .timers import (
    DueTimer,
    LoopResult,
    dead_letter_reasons,
    dead_letters,
    due_timers,
    redrive_timers,
    run_scanner,
    scan_timers,
)

__all__ = [
    "DueTimer",
    "LoopResult",
    "PurgeReport",
    "dead_letter_reasons",
    "dead_letters",
    "due_timers",
    "forget_instance",
    "forget_preview",
    "inspect_instance",
    "iso",
    "purge_inbox",
    "purge_logs",
    "redacted",
    "redrive_timers",
    "run_scanner",
    "scan_timers",
]
