"""``manage.py xsm_purge_logs``: remove old transition-log records."""

from __future__ import annotations

import argparse
import datetime as _dt
import time
from typing import Any

from django.utils import timezone

from django_xsm import operations
from django_xsm.management import XsmCommand, command_errors, duration_type
from django_xsm.management.durations import format_duration


def moment(text: str) -> _dt.datetime:
    """An argparse ``type`` for ``--before``: an ISO 8601 date or date and
    time, in the current time zone when it names no offset, not in the
    future."""
    try:
        value = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid --before {text!r}: give an ISO 8601 date or time, "
            "e.g. 2026-03-01 or 2026-03-01T12:00:00Z"
        ) from None
    if timezone.is_naive(value):
        value = timezone.make_aware(value)
    if value > timezone.now():
        raise argparse.ArgumentTypeError(
            f"Invalid --before {text!r}: it is in the future (every record would go; "
            "give the moment to keep the records from)"
        )
    return value


class Command(XsmCommand):
    help = """Remove transition-log records older than --older-than, or written
before --before (an ISO 8601 date or time; without an offset, in the
current time zone).

Only streams holding such records are visited, page by page; on a terminal
a counter shows the progress. --dry-run counts what would go.

examples:
  manage.py xsm_purge_logs --older-than 30d
  manage.py xsm_purge_logs --older-than 12h --machine order --dry-run
  manage.py xsm_purge_logs --older-than 1d12h -v 2
  manage.py xsm_purge_logs --before 2026-03-01T12:00:00Z
"""

    def add_arguments(self, parser: Any) -> None:
        when = parser.add_mutually_exclusive_group(required=True)
        when.add_argument(
            "--older-than",
            type=duration_type("--older-than"),
            metavar="DURATION",
            help="Age of the records to remove: 30d, 12h, 15m, 90s or combined (1d12h).",
        )
        when.add_argument(
            "--before",
            type=moment,
            metavar="DATETIME",
            help="Remove the records written before this moment: ISO 8601, e.g. "
            "2026-03-01T12:00:00Z (no offset: the current time zone).",
        )
        parser.add_argument(
            "--machine",
            metavar="NAME",
            help="Only logs of this machine's instances (logs of deleted instances are "
            "left to a run without --machine).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be removed; remove nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.dry_run = options["dry_run"]
        self.visited = 0
        self.removed = 0
        self.shown_at = 0.0
        self.live = self.verbosity >= 1 and self.stdout.isatty()
        try:
            with command_errors():
                report = operations.purge_logs(
                    options["before"] or options["older_than"],
                    machine=options["machine"],
                    dry_run=options["dry_run"],
                    progress=self.progress,
                )
        finally:
            if self.live and self.visited:
                self.stdout.write("\r\033[K", ending="")
        when = f"before {operations.iso(int(report.cutoff.timestamp() * 1000))}"
        if options["older_than"] is not None:
            age = format_duration(options["older_than"].total_seconds() * 1000)
            when = f"older than {age}, {when}"
        if report.dry_run:
            self.say(
                f"Would remove {report.records} transition record(s) from {report.streams} "
                f"log(s) ({when}; dry run: nothing removed)"
            )
        elif report.records:
            self.say(
                f"Removed {report.records} transition record(s) from {report.streams} log(s) "
                f"({when})",
                style=self.style.SUCCESS,
            )
        else:
            self.say(f"Nothing to remove ({when})")

    def progress(self, key: str, records: int) -> None:
        self.visited += 1
        self.removed += records
        if records:
            verb = "would remove" if self.dry_run else "removed"
            self.say(f"{key}: {verb} {records}", 2)
        now = time.monotonic()
        if self.live and self.verbosity < 2 and now - self.shown_at >= 0.1:
            self.shown_at = now
            self.stdout.write(
                f"\r{self.visited} log(s) visited, {self.removed} record(s)", ending=""
            )
            self.stdout.flush()
