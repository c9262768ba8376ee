"""``manage.py xsm_reencrypt``: rewrite a namespace's encrypted values
with the codec's newest key (the key-rotation step between adding a key
and dropping the old one)."""

from __future__ import annotations

from typing import Any

from django_xsm import backend, conf
from django_xsm.management import XsmCommand, command_errors, int_type
from django_xsm.redis import Reencryptor


class Command(XsmCommand):
    help = """Re-encrypt every encrypted value of XSM['PREFIX'] with the newest key of
XSM['CODEC_KEYS']: snapshots, stored responses and receipts, outbox entries
(waiting, retrying, dead letters) and transition-log payloads. Values the
newest key wrote and values in clear are left alone; the report counts the
values in clear (written before the codec was turned on: this command does
not encrypt them, see docs/security.md).

Key rotation: put the new key first (CODEC_KEYS = [new, old]) and deploy
everywhere; run this command; then drop the old key. A value is rewritten
only while it is still what was read, so running it next to live traffic
loses no commit; entries an outbox worker holds and keys that kept
changing are counted as busy: run it again to finish them.

Each SCAN step prints a progress line with its cursor; an interrupted run
resumes with --cursor.

examples:
  manage.py xsm_reencrypt --dry-run
  manage.py xsm_reencrypt --batch 500
  manage.py xsm_reencrypt --cursor 1234
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Count the values to rewrite; write nothing."
        )
        parser.add_argument(
            "--batch",
            type=int_type("--batch", minimum=1, maximum=100_000),
            default=100,
            metavar="N",
            help="Keys per SCAN step (default 100).",
        )
        parser.add_argument(
            "--cursor",
            type=int_type("--cursor", minimum=0, maximum=2**64 - 1),
            default=0,
            metavar="CURSOR",
            help="Resume the scan at this cursor (from a progress line).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dry_run = options["dry_run"]
        verb = "to rewrite" if dry_run else "rewritten"
        keys = values = busy = clear = 0
        cursor = options["cursor"]
        with command_errors():
            found = backend.get_backend()
            s = conf.get_settings()
            assert s.prefix is not None  # get_backend() refused a missing prefix
            walker = Reencryptor(found.client, prefix=s.prefix, codec=found.store.codec)
            for step in walker.run(cursor=cursor, batch=options["batch"], dry_run=dry_run):
                keys, values, busy = keys + step.keys, values + step.values, busy + step.busy
                clear += step.clear
                self.say(
                    f"cursor {step.cursor}: {keys} keys scanned, {values} values {verb}, "
                    f"{busy} busy, {clear} values in clear"
                )
        notes = ["run again to finish the busy ones"] if busy else []
        if clear:
            notes.append(
                "the command does not encrypt values in clear; see 'Turning a codec on' "
                "in docs/security.md"
            )
        self.say(
            f"done: {keys} keys scanned, {values} values {verb}, {busy} busy, "
            f"{clear} values in clear" + (f" ({'; '.join(notes)})" if notes else ""),
            style=self.style.SUCCESS,
        )
