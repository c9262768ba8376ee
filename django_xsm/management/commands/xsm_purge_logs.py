"""``manage.py xsm_purge_logs``: remove old transition-log records."""

from __future__ import annotations

import time
from typing import Any

from django_xsm import operations
from django_xsm.management import XsmCommand, command_errors, duration_type
from django_xsm.management.durations import format_duration


class Command(XsmCommand):
    help = """Remove transition-log records older than --older-than.

Only streams holding such records are visited, page by page; on a terminal
a counter shows the progress. --dry-run counts what would go.

examples:
  manage.py xsm_purge_logs --older-than 30d
  manage.py xsm_purge_logs --older-than 12h --machine order --dry-run
  manage.py xsm_purge_logs --older-than 1d12h -v 2
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--older-than",
            required=True,
            type=duration_type("--older-than"),
            metavar="DURATION",
            help="Age of the records to remove: 30d, 12h, 15m, 90s or combined (1d12h).",
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

    visited = 0
    removed = 0
    shown_at = 0.0
    live = False
    dry_run = False

    def handle(self, *args: Any, **options: Any) -> None:
        self.dry_run = options["dry_run"]
        self.visited = 0
        self.removed = 0
        self.shown_at = 0.0
        self.live = self.verbosity >= 1 and self.stdout.isatty()
        try:
            with command_errors():
                report = operations.purge_logs(
                    options["older_than"],
                    machine=options["machine"],
                    dry_run=options["dry_run"],
                    progress=self.progress,
                )
        finally:
            if self.live and self.visited:
                self.stdout.write("\r\033[K", ending="")
        age = format_duration(options["older_than"].total_seconds() * 1000)
        when = f"older than {age}, before {operations.iso(int(report.cutoff.timestamp() * 1000))}"
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
