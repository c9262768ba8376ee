"""``manage.py xsm_outbox``: what the outbox holds (pending, retrying, dead)
and what to do with dead letters (redrive, purge)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from django_xsm import outbox
from django_xsm.management import XsmCommand, command_errors, duration_type, int_type
from django_xsm.management.durations import format_duration


def _line(row: dict[str, Any]) -> str:
    head = (
        f"{row['state']:<9} {row['key']}  {row['event_type']}  attempts {row['attempts']}  "
        f"delivery {row['delivery_id']}"
    )
    if row["state"] == "pending":
        who = f"held by {row['consumer']}" if row["consumer"] else "not taken yet"
        tail = f"  ({who}, idle {format_duration(row['idle_ms'])})"
    elif row["state"] == "retrying":
        due = row["retry_in_ms"]
        when = f"in {format_duration(due)}" if due > 0 else "due now"
        tail = f"  retry at {row['retry_at']} ({when})"
    else:
        tail = f"  since {row['dead_at']}"
    error = f"  last error: {row['last_error']}" if row["last_error"] else ""
    return head + tail + error


class Command(XsmCommand):
    help = """List the outbox's pending, retrying and dead entries, or act on dead letters.

Without an action: every kind, oldest first (key, event type, attempts,
delivery id, last error) and a stats line; --json prints one document.
--redrive ID / --redrive-all move dead letters back into the outbox (same
delivery id, attempts from 0); --purge-dead --older-than D removes old
ones. --dry-run shows what an action would do.

examples:
  manage.py xsm_outbox
  manage.py xsm_outbox --json --limit 20
  manage.py xsm_outbox --redrive 1733_42a9c3f1-0
  manage.py xsm_outbox --redrive-all --dry-run
  manage.py xsm_outbox --purge-dead --older-than 30d
"""

    def add_arguments(self, parser: Any) -> None:
        action = parser.add_mutually_exclusive_group()
        action.add_argument(
            "--redrive", metavar="DELIVERY_ID", help="Move this dead letter back into the outbox."
        )
        action.add_argument(
            "--redrive-all", action="store_true", help="Move every dead letter back."
        )
        action.add_argument(
            "--purge-dead",
            action="store_true",
            help="Remove dead letters older than --older-than.",
        )
        parser.add_argument(
            "--older-than",
            type=duration_type("--older-than"),
            metavar="DURATION",
            help="With --purge-dead: 30d, 12h, 15m, 90s or combined (1d12h).",
        )
        parser.add_argument(
            "--limit",
            type=int_type("--limit", minimum=1, maximum=10_000),
            default=100,
            metavar="N",
            help="Entries listed per kind (default 100).",
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Show what the action would do; change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        acting = options["redrive"] is not None or options["redrive_all"] or options["purge_dead"]
        if options["older_than"] is not None and not options["purge_dead"]:
            raise CommandError("--older-than goes with --purge-dead")
        if options["purge_dead"] and options["older_than"] is None:
            raise CommandError(
                "--purge-dead needs --older-than, e.g. --purge-dead --older-than 30d"
            )
        if options["dry_run"] and not acting:
            raise CommandError("--dry-run goes with --redrive, --redrive-all or --purge-dead")
        with command_errors():
            if options["redrive"] is not None:
                return self.redrive(options["redrive"], options)
            if options["redrive_all"]:
                return self.redrive_all(options)
            if options["purge_dead"]:
                return self.purge(options)
            found = outbox.list_entries(limit=options["limit"])
        if options["json"]:
            self.stdout.write(json.dumps(found, indent=2, default=str))
            return None
        for kind in ("pending", "retrying", "dead"):
            for row in found[kind]:
                self.say(_line(row))
        self.say(" ".join(f"{name}={value}" for name, value in found["stats"].items()))
        return None

    def _report(self, options: dict[str, Any], document: dict[str, Any], text: str) -> None:
        if options["json"]:
            self.stdout.write(json.dumps(document))
        else:
            self.say(text, style=None if options["dry_run"] else self.style.SUCCESS)

    def redrive(self, delivery_id: str, options: dict[str, Any]) -> None:
        dry = options["dry_run"]
        if not outbox.redrive(delivery_id, dry_run=dry):
            raise CommandError(
                f"No dead letter with delivery id {delivery_id!r} (list them with "
                "`manage.py xsm_outbox`; a redriven entry is back among the pending ones)"
            )
        text = (
            f"Would redrive {delivery_id} (dry run: nothing moved)"
            if dry
            else f"Redrove {delivery_id}: back in the outbox, attempts from 0"
        )
        self._report(options, {"redriven": [delivery_id], "dry_run": dry}, text)

    def redrive_all(self, options: dict[str, Any]) -> None:
        dry = options["dry_run"]
        count = outbox.redrive_all(dry_run=dry)
        if dry:
            text = f"Would redrive {count} dead letter(s) (dry run: nothing moved)"
        else:
            text = f"Redrove {count} dead letter(s)" if count else "No dead letters to redrive"
        self._report(options, {"redriven": count, "dry_run": dry}, text)

    def purge(self, options: dict[str, Any]) -> None:
        dry, age = options["dry_run"], options["older_than"]
        count = outbox.purge_dead(age, dry_run=dry)
        when = f"older than {format_duration(age.total_seconds() * 1000)}"
        if dry:
            text = f"Would remove {count} dead letter(s) ({when}; dry run: nothing removed)"
        else:
            text = (
                f"Removed {count} dead letter(s) ({when})"
                if count
                else f"Nothing to remove ({when})"
            )
        self._report(options, {"purged": count, "dry_run": dry}, text)
