"""``manage.py xsm_sync_models``: bring model rows up to their statecharts."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from django_xsm.fields.sync import SyncReport, statechart_fields, sync_field
from django_xsm.management import XsmCommand, command_errors, int_type


class Command(XsmCommand):
    help = """Repair model rows whose StatechartField lags its Redis instance.

Redis is the source of truth. A row lags when the database transaction of a
send rolled back after the Redis commit; this moves every lagging row
forward (fenced by version: it never moves a row backwards, so it is safe
beside live traffic). It creates the instance of every row that never had
one (Redis was unreachable when the row's INSERT committed, or the row was
loaded from a fixture): initial state, its timers armed, its initial
emitted events queued; --dry-run lists them instead. It also reports rows
whose instance Redis no longer has (missing: not re-created, the row had
moved on), rows whose version is ahead of Redis (ahead), rows without a
usable key (unkeyed), rows it could not read, create or update (failed)
and Redis instances whose row is gone (orphans); --forget-orphans erases
those. Exit status 1 when Redis or the database fails (a failed row
included), 3 with --check when anything lags, had no instance, is missing,
is ahead or is orphaned.

examples:
  manage.py xsm_sync_models
  manage.py xsm_sync_models --model orders.Order --batch 1000 -v 2
  manage.py xsm_sync_models --dry-run --check       # for monitoring
  manage.py xsm_sync_models --forget-orphans --orphan-min-age 600
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--model",
            action="append",
            metavar="APP.MODEL",
            help="Only this model (repeatable); default: every model with a StatechartField.",
        )
        parser.add_argument(
            "--batch",
            type=int_type("--batch", minimum=1, maximum=100_000),
            default=500,
            help="Rows read per database query (default 500).",
        )
        parser.add_argument(
            "--database", default=DEFAULT_DB_ALIAS, help="Database alias (default 'default')."
        )
        parser.add_argument(
            "--forget-orphans",
            action="store_true",
            help="Erase Redis instances (and their logs) whose row no longer exists.",
        )
        parser.add_argument(
            "--orphan-min-age",
            type=int_type("--orphan-min-age", minimum=0, maximum=10 * 365 * 86400),
            default=300,
            metavar="SECONDS",
            help="--forget-orphans leaves instances committed less than this many seconds "
            "ago: a row whose transaction has not committed yet looks like an orphan "
            "(default 300).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Report what would change; change nothing."
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="Exit 3 when any row lagged, had no instance, was missing or ahead, or any "
            "orphan was found.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            fields = statechart_fields(options["model"])
        except (LookupError, ValueError) as exc:
            raise CommandError(f"{exc} (give --model as app_label.ModelName)") from exc
        if not fields:
            self.say("No model has a StatechartField: nothing to do")
            return
        found_any = failed_any = False
        with command_errors():
            for f in fields:
                try:
                    report = sync_field(
                        f,
                        batch=options["batch"],
                        dry_run=options["dry_run"],
                        forget_orphans=options["forget_orphans"],
                        orphan_min_age_s=options["orphan_min_age"],
                        using=options["database"],
                        progress=self.progress,
                    )
                except DatabaseError as exc:
                    # This model's table cannot be read (not migrated on
                    # that database, a lost connection): the others still run.
                    failed_any = True
                    first = str(exc).splitlines()[0] if str(exc) else ""
                    self.stderr.write(
                        f"{f.model._meta.label}.{f.name}: database error "
                        f"({type(exc).__name__}: {first})"
                    )
                    continue
                self.summary(report)
                found_any = found_any or report.findings
                failed_any = failed_any or bool(report.failed)
        if failed_any:
            raise CommandError("some rows or models could not be synced (see above)")
        if options["check"] and found_any:
            raise CommandError(
                "rows lagged, had no instance, were missing or ahead, or orphans were found "
                "(see above)",
                returncode=3,
            )

    def progress(self, report: SyncReport) -> None:
        self.say(f"{report.label}: {report.rows} row(s) checked", 2)

    def summary(self, report: SyncReport) -> None:
        verb = "would repair" if report.dry_run else "repaired"
        line = (
            f"{report.label}: {report.rows} row(s), {verb} {report.repaired}, "
            f"{len(report.missing)} missing, {len(report.orphans)} orphan(s)"
        )
        if report.created:
            verb = "would create" if report.dry_run else "created"
            line += f", {verb} {len(report.created)} instance(s)"
        for count, what in (
            (len(report.ahead), "ahead of Redis"),
            (len(report.unkeyed), "unkeyed"),
            (len(report.failed), "failed"),
        ):
            if count:
                line += f", {count} {what}"
        if report.forgotten:
            line += f", {report.forgotten} orphan(s) forgotten"
        if report.kept:
            line += f", {len(report.kept)} orphan(s) kept (recent, changed or claimed again)"
        if report.dry_run:
            line += " (dry run: nothing changed)"
        self.say(line, style=self.style.SUCCESS if not report.dry_run else None)
        for key in report.created:
            if report.dry_run:  # what a dry run is for: listed at every verbosity
                self.say(f"  would create: {key}")
            else:
                self.say(f"  created: {key}", 2)
        for key in report.missing:
            self.say(f"  missing in Redis: {key}", 2)
        for key in report.ahead:
            self.say(f"  ahead of Redis: {key}", 2)
        for pk in report.unkeyed:
            self.say(f"  unkeyed: pk={pk}", 2)
        for key, reason in report.failed:
            self.stderr.write(f"  failed: {key}: {reason}")
        for key in report.orphans:
            self.say(f"  orphan: {key}", 2)
        for key in report.kept:
            self.say(f"  orphan kept: {key}", 2)
