"""The outbox's workers: deliver what commits emitted to their handlers
(docs/outbox.md). The ``COMMIT`` script writes an emitted event to the
outbox in the same atomic step as the snapshot; this package takes it from
there:

* :mod:`.handlers` and :mod:`.patterns` — pattern -> handler, the most
  specific pattern wins;
* :mod:`.worker` — :class:`OutboxWorker`: lease, call, ack, retry
  (:mod:`.policy`), dead-letter and compensate (:mod:`.compensation`);
* :mod:`.loop` — :func:`drain` and :func:`run_worker` (the daemon);
* :mod:`.entries` — listings, health, redrive and purge;
* :mod:`.static` — emitted types no pattern takes (``xsm.E013``);
* :mod:`.celery` — handlers that forward to Celery (optional extra).
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
