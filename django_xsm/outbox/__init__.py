"""The outbox's workers: deliver what commits emitted to their handlers.

A chart's ``xstate.emit`` action (or ``instance.emit()`` in a Python
action) puts an event into the commit; the ``COMMIT`` script writes it to
the outbox in the same atomic step as the snapshot. This package takes it
from there (docs/outbox.md):

* :mod:`.handlers` — ``XSM['OUTBOX']['HANDLERS']``: pattern -> handler,
  imported once; the most specific pattern wins (:mod:`.patterns`);
* :mod:`.worker` — :class:`OutboxWorker`: take leases, call handlers, ack,
  retry with full jitter (:mod:`.policy`), dead-letter and compensate
  (:mod:`.compensation`: the instance gets ``xsm.outbox.failed``);
* :mod:`.loop` — :func:`drain` (``xsm_run_outbox --once``) and
  :func:`run_worker` (the daemon);
* :mod:`.entries` — listings, :func:`outbox_health`, redrive and purge
  (``xsm_outbox``, the admin);
* :mod:`.static` — emitted types no pattern takes (check ``xsm.E013``);
* :mod:`.celery` — handlers that forward to Celery (imported only when
  named; Celery is an optional extra).
"""

from django_xsm.persistence.outbox import Delivery, OutboxEntry

from .compensation import FAILED_EVENT, Compensation, compensate, compensation_event
from .entries import (
    dead_letter_ids,
    list_entries,
    outbox_health,
    purge_dead,
    redrive,
    redrive_all,
)
from .handlers import Handler, HandlerTable, Route, get_handlers, handler_problems
from .loop import drain, run_worker
from .patterns import matches, most_specific
from .policy import RetryPolicy, describe_error, redact_text
from .results import LoopResult, WorkResult
from .static import Unhandled, emitted_types, unhandled_emits
from .worker import OutboxWorker, default_consumer

__all__ = [
    "FAILED_EVENT",
    "Compensation",
    "Delivery",
    "Handler",
    "HandlerTable",
    "LoopResult",
    "OutboxEntry",
    "OutboxWorker",
    "RetryPolicy",
    "Route",
    "Unhandled",
    "WorkResult",
    "compensate",
    "compensation_event",
    "dead_letter_ids",
    "default_consumer",
    "describe_error",
    "drain",
    "emitted_types",
    "get_handlers",
    "handler_problems",
    "list_entries",
    "matches",
    "most_specific",
    "outbox_health",
    "purge_dead",
    "redact_text",
    "redrive",
    "redrive_all",
    "run_worker",
    "unhandled_emits",
]
