"""``manage.py xsm_forget KEY``: erase one instance (asks first)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import CommandError

from django_xsm import operations
from django_xsm.management import XsmCommand, command_errors


class Command(XsmCommand):
    help = """Erase everything the namespace holds about one instance: its record,
deadlines and timer bookkeeping, lock, transition log and idempotency rows.
Only its highest version number is kept, so a re-created instance never
reuses a version. Asks for confirmation on a terminal; without one, --yes
is required.

examples:
  manage.py xsm_forget order:42
  manage.py xsm_forget order:42 --yes
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("key", metavar="KEY", help="The instance key, e.g. order:42.")
        parser.add_argument(
            "--yes",
            "--no-input",
            "--noinput",
            action="store_false",
            dest="interactive",
            help="Do not ask for confirmation.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        key = options["key"]
        with command_errors():
            preview = operations.forget_preview(key)
            if preview["empty"]:
                raise CommandError(f"Nothing is stored under {key!r} (check the key)")
            if options["interactive"]:
                self.confirm(preview)
            counts = operations.forget_instance(key)
        self.say(
            f"Forgot {key!r}: record {counts['snapshot']}, deadlines {counts['deadlines']}, "
            f"lock {counts['lock']}, log records {counts['log']}, "
            f"idempotency rows {counts['idempotency']}",
            style=self.style.SUCCESS,
        )

    def confirm(self, preview: dict[str, Any]) -> None:
        if not sys.stdin.isatty():
            raise CommandError(
                "xsm_forget asks for confirmation and there is no terminal; "
                "pass --yes to erase without asking"
            )
        record = preview["record"]
        if record and "damaged" in record:
            what = f"a damaged record: {record['damaged']}"
        elif record:
            what = (
                f"{record['machine']} instance in state {json.dumps(record['value'])}, "
                f"version {record['version']}, updated {record['updated_at']}"
            )
        else:
            what = "no record"
        extras = [
            *(["a transition log"] if preview["log"] else []),
            *([f"{preview['idempotency']} idempotency row(s)"] if preview["idempotency"] else []),
        ]
        self.stdout.write(
            f"This erases {preview['key']!r} ({what}"
            + (f"; with {' and '.join(extras)}" if extras else "")
            + "). It cannot be undone."
        )
        answer = input("Type 'yes' to continue, or 'no' to cancel: ")
        if answer.strip().lower() != "yes":
            raise CommandError("Cancelled: nothing was erased")
