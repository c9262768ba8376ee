"""``manage.py xsm_purge_inbox``: remove expired idempotency rows."""

from __future__ import annotations

from typing import Any

from django_xsm import operations
from django_xsm.management import XsmCommand, command_errors, int_type


class Command(XsmCommand):
    help = """Remove idempotency rows whose TTL (IDEMPOTENCY['TTL_S']) has passed.

The cost grows with the expired rows, not with the rows kept: the inbox
keeps an expiry index per bucket. Expiry follows the Redis server's clock.

examples:
  manage.py xsm_purge_inbox
  manage.py xsm_purge_inbox --dry-run
  manage.py xsm_purge_inbox --limit 100000
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--limit",
            type=int_type("--limit", minimum=1, maximum=10_000_000),
            metavar="N",
            help="Remove at most this many rows (default: every expired row).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count the expired rows; remove nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with command_errors():
            count = operations.purge_inbox(dry_run=options["dry_run"], limit=options["limit"])
        if options["dry_run"]:
            self.say(f"Would remove {count} expired idempotency row(s) (dry run: nothing removed)")
        elif count:
            self.say(f"Removed {count} expired idempotency row(s)", style=self.style.SUCCESS)
        else:
            self.say("No expired idempotency rows")
        if options["limit"] is not None and count >= options["limit"]:
            self.say(f"the --limit of {options['limit']} was reached; more may have expired")
