"""Operations on stored instances, shared by the ``xsm_*`` management
commands and the admin, as functions tests call directly.

* :mod:`.instances` — inspect and forget one instance;
* :mod:`.timers` — what is due or dead-lettered, one scan, the scan loop;
* :mod:`.retention` — purge old transition-log records and expired
  idempotency rows.

Each command parses its arguments, calls one function here and prints what
it returns; everything runs on the process backend built from
``settings.XSM`` (:mod:`django_xsm.backend`). Functions raise the library's
own errors: ``StoreUnavailableError`` when Redis cannot be reached,
``UnknownMachineError`` for a machine name that is not configured,
``InstanceNotFoundError`` for an absent key.
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
