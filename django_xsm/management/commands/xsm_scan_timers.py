"""``manage.py xsm_scan_timers``: fire due ``after`` deadlines (cron or daemon)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from django_xsm import operations
from django_xsm.management import XsmCommand, command_errors, int_type, summary
from django_xsm.management.durations import format_duration
from django_xsm.management.stopping import stop_on_signals
from django_xsm.persistence.timers import ScanResult


def _outcome(result: ScanResult) -> str:
    if result.errors:
        return "dead-lettered" if result.dead_lettered else "failed"
    if result.fired:
        return "fired"
    if result.locked:
        return "locked"
    return "stale"


class Command(XsmCommand):
    work_counter = "scanned"
    help = """Fire the due `after` deadlines of every configured machine.

Without --loop: one pass (for cron), a summary line, exit status 1 when any
fire failed. With --loop: scan every --interval until SIGTERM or SIGINT,
finishing the instance in hand, then exit 0. Any number of scanners may run
at once: each deadline fires once.

examples:
  manage.py xsm_scan_timers
  manage.py xsm_scan_timers --loop --interval 1s
  manage.py xsm_scan_timers --machine order --limit 500 --lock pessimistic
  manage.py xsm_scan_timers --loop --key-prefix order:eu-
  manage.py xsm_scan_timers --dry-run -v 2
  manage.py xsm_scan_timers --redrive order:42 --redrive order:43
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--loop", action="store_true", help="Keep scanning until SIGTERM/SIGINT (daemon)."
        )
        self.add_interval(
            parser, "Pause between passes with --loop, e.g. 1s, 500ms, 1m (default 1s)."
        )
        parser.add_argument(
            "--limit",
            type=int_type("--limit", minimum=1, maximum=100_000),
            metavar="N",
            default=1000,
            help="Instances per pass, earliest due first (default 1000).",
        )
        parser.add_argument(
            "--machine",
            metavar="NAME",
            help="Only instances of this machine (a name from XSM['MACHINES']).",
        )
        parser.add_argument(
            "--key-prefix",
            metavar="TEXT",
            default="",
            help="Only instances whose key starts with TEXT (literally: * and ? are "
            "plain characters), e.g. order:eu- to shard scanners by key.",
        )
        parser.add_argument(
            "--lock",
            choices=["optimistic", "pessimistic"],
            help="Lock strategy for the fires (default: XSM['LOCK']).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="List what is due (key, machine, due time, lag) and the instances with "
            "dead-lettered timers; fire nothing.",
        )
        parser.add_argument(
            "--redrive",
            action="append",
            metavar="KEY",
            default=[],
            help="Give the dead-lettered timers of KEY their attempts back (repeatable); "
            "the next scan fires them again. Fix the cause first (xsm_inspect KEY).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"] and options["loop"]:
            raise CommandError("--dry-run lists what is due once; drop --loop")
        if options["redrive"]:
            if options["loop"] or options["dry_run"]:
                raise CommandError("--redrive runs once and fires nothing; drop --loop/--dry-run")
            return self.redrive(options["redrive"])
        with command_errors():
            if options["dry_run"]:
                return self.dry_run(options)
            if options["loop"]:
                return self.loop(options)
            result = operations.scan_timers(
                machine=options["machine"],
                limit=options["limit"],
                lock=options["lock"],
                on_fire=self.fired,
                key_prefix=options["key_prefix"],
            )
        self.say(summary(result))
        if result.scanned >= options["limit"]:
            self.say(f"the --limit of {options['limit']} was reached; more may be due", 2)
        if result.errors:
            keys = ", ".join(result.failed_keys[:10])
            more = "..." if len(result.failed_keys) > 10 else ""
            raise CommandError(
                f"{result.errors} timer fire(s) failed ({keys}{more}); see the django_xsm.timers "
                "log and `manage.py xsm_inspect KEY`"
            )
        return None

    def redrive(self, keys: list[str]) -> None:
        with command_errors():
            done = operations.redrive_timers(keys)
        for key, redriven in done.items():
            self.say(f"{'redriven' if redriven else 'no dead timer'} {key}")
        missed = [key for key, redriven in done.items() if not redriven]
        if missed:
            raise CommandError(
                f"{len(missed)} key(s) had no dead-lettered timer: {', '.join(missed[:10])} "
                "(see `manage.py xsm_scan_timers --dry-run`)"
            )

    def fired(self, key: str, outcome: ScanResult) -> None:
        lag = f" (lag {format_duration(outcome.max_lag_ms)})" if outcome.fired else ""
        self.say(f"{_outcome(outcome)} {key}{lag}", 2)

    def dry_run(self, options: dict[str, Any]) -> None:
        due = operations.due_timers(
            machine=options["machine"], limit=options["limit"], key_prefix=options["key_prefix"]
        )
        for timer in due:
            self.say(
                f"{timer.key}  {timer.machine}  due {operations.iso(timer.due_ms)}  "
                f"lag {format_duration(timer.lag_ms)}"
            )
        parked = operations.dead_letters(
            machine=options["machine"], limit=options["limit"], key_prefix=options["key_prefix"]
        )
        reasons = operations.dead_letter_reasons([key for key, _m, _t in parked])
        for key, machine, parked_ms in parked:
            why = f"  ({reasons[key]})" if reasons.get(key) else ""
            self.say(f"dead-lettered {key}  {machine}  since {operations.iso(parked_ms)}{why}")
        self.say(
            f"{len(due)} instance(s) due, {len(parked)} with dead-lettered timers "
            "(dry run: nothing fired)"
        )

    def loop(self, options: dict[str, Any]) -> None:
        with stop_on_signals() as stopping:
            interval = options["interval"].total_seconds()
            self.say(
                f"Scanning every {format_duration(interval * 1000)} (at most {options['limit']} "
                "instances per pass); stop with SIGTERM or Ctrl-C"
            )
            outcome = operations.run_scanner(
                stop=stopping.event,
                interval_s=interval,
                machine=options["machine"],
                limit=options["limit"],
                lock=options["lock"],
                on_pass=self.passed,
                on_fire=self.fired,
                key_prefix=options["key_prefix"],
            )
        self.say(
            f"Stopped{stopping.reason} after {outcome.passes} pass(es): {summary(outcome.total)}"
        )
