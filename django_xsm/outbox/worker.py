"""OutboxWorker: one consumer of the outbox, calling each entry's handler.

One batch is one ``OutboxReader.take()``; per lease the handler's return is
acknowledged (all of the batch in one round trip), a raise is retried at a
full-jitter time stored in Redis (:mod:`.policy`; the worker never sleeps
on it) or, out of attempts or without a handler, dead-lettered after the
instance got its compensation event (:mod:`.compensation`; compensating
first means a crash in between repeats it, replayed, instead of losing it).
Delivery is at least once; leases still untouched at :data:`LEASE_MARGIN`
of the visibility timeout are left to another worker. Every outcome is one
line on the ``django_xsm.outbox`` logger with its fields in ``record.xsm``
(docs/outbox.md, Retries and dead letters, In production).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from django_xsm import conf
from django_xsm.backend.build import clock_is_set, get_outbox
from django_xsm.backend.build import now_ms as backend_now_ms
from django_xsm.persistence.outbox import OutboxEntry, OutboxLease, OutboxReader

from .compensation import FAILED_EVENT, Compensation, compensate, trace_id
from .handlers import HandlerTable, get_handlers
from .policy import RetryPolicy, clean_text, describe_error
from .results import WorkResult
from .times import iso, now_ms

__all__ = ["OutboxWorker", "default_consumer"]

logger = logging.getLogger("django_xsm.outbox")

#: Share of the visibility timeout after which untouched leases are left alone.
LEASE_MARGIN = 0.8
_LOST = "the lease had been taken over (visibility timeout): the worker holding it now decides"
_LOST_AFTER_DELIVERY = (
    "delivered, but the lease had been taken over (visibility timeout): it is delivered again"
)


def default_consumer() -> str:
    """``<hostname>-<pid>``: unique per process, readable in listings."""
    host = socket.gethostname().encode("ascii", "replace").decode("ascii") or "worker"
    return clean_text(f"{host}-{os.getpid()}", 200).replace(" ", "_")


class OutboxWorker:
    """Takes leases as ``consumer`` and runs their handlers (see the module
    docstring). ``policy`` holds the attempts and backoff; ``clock`` gives
    epoch ms for retry times (the worker's clock: keep hosts NTP-synced);
    with ``due_by_clock`` it also decides when a retry is due, instead of
    the Redis server's clock (a test that moves django-xsm's clock);
    ``compensate`` is :func:`~.compensation.compensate` unless replaced."""

    def __init__(
        self,
        outbox: OutboxReader,
        handlers: HandlerTable,
        *,
        consumer: str,
        batch: int = 100,
        policy: RetryPolicy | None = None,
        visibility_timeout_ms: int = 60_000,
        redact: Iterable[str] = (),
        clock: Callable[[], int] = now_ms,
        due_by_clock: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        compensate: Callable[[OutboxEntry, str, int], Compensation] = compensate,
    ) -> None:
        self.outbox = outbox
        self.handlers = handlers
        self.consumer = consumer
        self.batch = batch
        self.policy = policy or RetryPolicy()
        self.visibility_timeout_ms = visibility_timeout_ms
        self.redact = tuple(redact)
        self.clock = clock
        self.due_by_clock = due_by_clock
        self.monotonic = monotonic
        self.compensate = compensate

    @classmethod
    def from_settings(
        cls, *, consumer: str | None = None, batch: int = 100, rng: random.Random | None = None
    ) -> OutboxWorker:
        """A worker on the process backend's outbox with ``XSM['OUTBOX']``'s
        handlers and policy (``ImproperlyConfigured`` for a handler that
        does not import), on django-xsm's clock (:func:`~django_xsm.backend.now_ms`;
        a clock a test set also decides when retries are due)."""
        s = conf.get_settings()
        o = s.outbox
        policy = RetryPolicy.of(o.max_attempts, o.backoff_s, o.max_backoff_s, rng)
        return cls(
            get_outbox(),
            get_handlers(),
            consumer=consumer or default_consumer(),
            batch=batch,
            policy=policy,
            visibility_timeout_ms=o.visibility_timeout_ms,
            redact=s.audit.redact,
            clock=backend_now_ms,
            due_by_clock=clock_is_set(),
        )

    # --- one batch --------------------------------------------------------------------

    def run_batch(self) -> WorkResult:
        """Take up to ``batch`` leases and handle each (``StoreError`` when
        Redis fails; leases not finished then are taken over later)."""
        leases = self.outbox.take(
            self.consumer,
            count=self.batch,
            visibility_timeout_ms=self.visibility_timeout_ms,
            now_ms=self.clock() if self.due_by_clock else None,
        )
        taken_at = self.monotonic()
        result = WorkResult(taken=len(leases))
        limit_s = self.visibility_timeout_ms / 1000 * LEASE_MARGIN
        handled: list[tuple[OutboxLease, str]] = []
        for lease in leases:
            if self.monotonic() - taken_at > limit_s:
                result.skipped += 1
                text = "left for another worker: the batch ran close to the visibility timeout"
                self._log(logging.INFO, lease, "skipped", f"{text} (lower --batch)")
                continue
            done = self.handle(lease, result)
            if done is not None:
                handled.append((lease, done))
        # The batch's handlers returned: acknowledge them in one round trip.
        acked = self.outbox.ack_many([lease for lease, _ in handled])
        for (lease, text), ok in zip(handled, acked, strict=True):
            if ok:
                result.delivered += 1
                self._log(logging.INFO, lease, "delivered", text)
            else:
                result.lost += 1
                self._log(logging.WARNING, lease, "lost", _LOST_AFTER_DELIVERY)
        return result

    def handle(self, lease: OutboxLease, result: WorkResult) -> str | None:
        """Deliver one lease; a failure is recorded in ``result`` (retry or
        dead letter), a success returned as its log text for the batch's
        acknowledgement."""
        entry = lease.entry
        delivery = entry.delivery()
        if delivery.attempt > self.policy.max_attempts:
            # Out of attempts before this one: deliveries that were interrupted
            # (a handler that kills its worker) or a deferred compensation.
            error = entry.last_error or (
                f"gave up after {entry.attempts} attempt(s): the delivery was interrupted "
                "(its worker stopped, or a handler ran past the visibility timeout)"
            )
            self._dead(lease, error, entry.attempts, result)
            return None
        route = self.handlers.route(entry.event_type)
        if route is None:
            error = (
                f"no handler for event type {entry.event_type!r}: no pattern of "
                "XSM['OUTBOX']['HANDLERS'] matches it"
            )
            self._dead(lease, clean_text(error), delivery.attempt, result)
            return None
        started = self.monotonic()
        try:
            route.handler(dict(entry.event), delivery=delivery)
        except Exception as exc:
            error = describe_error(exc, entry.event, redact_fragments=self.redact)
            if self.policy.exhausted(delivery.attempt):
                self._dead(lease, error, delivery.attempt, result)
            else:
                self._retry(lease, error, delivery.attempt, result)
            return None
        took_ms = round((self.monotonic() - started) * 1000)
        return f"delivered to {route.path} in {took_ms}ms"

    def _retry(self, lease: OutboxLease, error: str, attempt: int, result: WorkResult) -> None:
        result.note_failure(lease.entry.delivery_id)
        delay_ms = self.policy.delay_ms(attempt)
        retry_at = self.clock() + delay_ms
        if self.outbox.fail(lease, error, retry_at_ms=retry_at) == "lost":
            self._lost(lease, error, result)
            return
        result.retried += 1
        text = (
            f"failed ({attempt}/{self.policy.max_attempts}): {error}; "
            f"retry at {iso(retry_at)} (in {delay_ms}ms)"
        )
        self._log(logging.WARNING, lease, "retry", text, error=error, retry_at=iso(retry_at))

    def _dead(self, lease: OutboxLease, error: str, attempts: int, result: WorkResult) -> None:
        entry = lease.entry
        result.note_failure(entry.delivery_id)
        found = self.compensate(entry, error, attempts)
        if found.outcome == "deferred":
            # Park it as a retry with its error: the next take finds it out
            # of attempts and compensates, the handler is not called again.
            retry_at = self.clock() + self.policy.delay_ms(max(attempts, 1))
            if self.outbox.fail(lease, error, retry_at_ms=retry_at) == "lost":
                self._lost(lease, error, result)
                return
            result.deferred += 1
            text = (
                f"{error}; compensation {FAILED_EVENT} deferred ({found.reason}): tried again "
                f"at {iso(retry_at)}"
            )
            self._log(logging.WARNING, lease, "compensation deferred", text, error=error)
            return
        if found.outcome == "refused":
            result.refused += 1
            text = f"compensation {FAILED_EVENT} refused by the instance: {found.reason}"
            self._log(logging.WARNING, lease, "compensation refused", text, error=error)
        else:
            result.compensated += 1
            what = "sent" if found.outcome == "sent" else "already applied (replayed, not again)"
            text = f"compensation {FAILED_EVENT} {what}"
            self._log(logging.INFO, lease, "compensation sent", text, error=error)
        if self.outbox.fail(lease, error, retry_at_ms=None) == "dead":
            result.dead_lettered += 1
            text = f"dead-lettered after {attempts} attempt(s): {error}"
            self._log(logging.ERROR, lease, "dead-lettered", text, error=error)
        else:
            self._lost(lease, error, result)

    def _lost(self, lease: OutboxLease, error: str, result: WorkResult) -> None:
        result.lost += 1
        self._log(logging.WARNING, lease, "lost", f"{error}; {_LOST}", error=error)

    def _log(self, level: int, lease: OutboxLease, outcome: str, text: str, **more: Any) -> None:
        if not logger.isEnabledFor(level):
            return  # the common case for "delivered" in production: no work per entry
        entry = lease.entry
        fields = {
            "outcome": outcome,
            "delivery_id": entry.delivery_id,
            "key": entry.key,
            "machine": entry.machine,
            "event": entry.event_type,
            "attempt": entry.attempts + 1,
            "consumer": self.consumer,
            "correlation_id": trace_id(entry.event),
            **more,
        }
        trace = f" [{fields['correlation_id']}]" if fields["correlation_id"] else ""
        logger.log(
            level,
            "outbox %s of %r (delivery %s, attempt %d): %s%s",
            entry.event_type,
            entry.key,
            entry.delivery_id,
            entry.attempts + 1,
            text,
            trace,
            extra={"xsm": fields},
        )
