"""``manage.py xsm_run_outbox``: deliver emitted events to their handlers
(a daemon, or ``--once`` for cron and tests)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError

from django_xsm import outbox
from django_xsm.management import XsmCommand, command_errors, int_type, summary
from django_xsm.management.durations import format_duration
from django_xsm.management.stopping import stop_on_signals


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86_400 * 365:
        raise argparse.ArgumentTypeError(
            f"Invalid --max-seconds {text!r}: give a number of seconds above 0, e.g. 30 or 0.5"
        )
    return value


class Command(XsmCommand):
    work_counter = "taken"
    help = """Deliver the outbox's entries to the handlers of XSM['OUTBOX']['HANDLERS'].

Without --once: a daemon taking batches until SIGTERM or SIGINT (the batch
in hand finishes), polling every --interval while idle. With --once: take
batches until nothing is due, print a summary, exit 1 when a delivery
failed. Run as many workers as you like: each entry is leased to one at a
time, and a lease held past XSM['OUTBOX']['VISIBILITY_TIMEOUT_S'] goes to
another.

examples:
  manage.py xsm_run_outbox
  manage.py xsm_run_outbox --once
  manage.py xsm_run_outbox --consumer web-1 --batch 50 --interval 500ms
  manage.py xsm_run_outbox --max-seconds 300
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--once",
            action="store_true",
            help="Drain what is due now, then exit (cron, tests); exit 1 when a delivery failed.",
        )
        parser.add_argument(
            "--consumer",
            metavar="NAME",
            help="Consumer name in the group (default: <hostname>-<pid>); unique per process.",
        )
        parser.add_argument(
            "--batch",
            type=int_type("--batch", minimum=1, maximum=10_000),
            default=100,
            metavar="N",
            help="Entries per take (default 100); a batch should finish well inside the "
            "visibility timeout.",
        )
        self.add_interval(parser, "Pause when a take found nothing, e.g. 1s, 500ms (default 1s).")
        parser.add_argument(
            "--max-seconds",
            type=_seconds,
            metavar="S",
            help="Stop after S seconds (finishing the batch in hand), e.g. to recycle workers.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with command_errors():
            worker = outbox.OutboxWorker.from_settings(
                consumer=options["consumer"], batch=options["batch"]
            )
            if not options["once"]:
                return self.loop(worker, options)
            result = outbox.drain(worker, max_seconds=options["max_seconds"], on_batch=self.batch)
        self.say(summary(result))
        if result.errors:
            ids = ", ".join(result.failed[:10]) + ("..." if len(result.failed) > 10 else "")
            raise CommandError(
                f"{result.errors} delivery(ies) failed ({ids}); see the django_xsm.outbox log "
                "and `manage.py xsm_outbox`"
            )
        return None

    def batch(self, result: outbox.WorkResult, message: str | None = None) -> None:
        if message is not None:
            self.stderr.write(f"{message}; retrying")
        elif result.taken and self.verbosity >= 2:
            self.say(summary(result), 2)

    def loop(self, worker: outbox.OutboxWorker, options: dict[str, Any]) -> None:
        with stop_on_signals() as stopping:
            interval = options["interval"].total_seconds()
            self.say(
                f"Delivering as {worker.consumer} ({worker.batch} per batch, polling every "
                f"{format_duration(interval * 1000)} when idle); stop with SIGTERM or Ctrl-C"
            )
            outcome = outbox.run_worker(
                worker,
                stop=stopping.event,
                interval_s=interval,
                max_seconds=options["max_seconds"],
                on_batch=self.passed,
            )
        self.say(
            f"Stopped{stopping.reason} after {outcome.batches} batch(es): {summary(outcome.total)}"
        )
