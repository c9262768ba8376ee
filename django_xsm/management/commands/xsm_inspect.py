"""``manage.py xsm_inspect KEY``: one instance as stored (context redacted)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from django_xsm import operations
from django_xsm.exceptions import InstanceNotFoundError, SnapshotCorruptError
from django_xsm.management import XsmCommand, command_errors, int_type
from django_xsm.management.durations import format_duration


def _json(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, sort_keys=False, default=str)


class Command(XsmCommand):
    help = """Show one instance: machine, state, context (redacted), versions,
deadlines with their failures (dead-lettered ones marked) and its last
transitions. --json prints one JSON document instead.

examples:
  manage.py xsm_inspect order:42
  manage.py xsm_inspect order:42 --log 50
  manage.py xsm_inspect order:42 --json | jq .deadlines
"""

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("key", metavar="KEY", help="The instance key, e.g. order:42.")
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")
        parser.add_argument(
            "--log",
            type=int_type("--log", minimum=0, maximum=1000),
            default=10,
            metavar="N",
            help="How many of the last transitions to show (default 10, 0 for none).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        key = options["key"]
        with command_errors():
            try:
                data = operations.inspect_instance(key, log=options["log"])
            except InstanceNotFoundError as exc:
                # the library's hint (create=True) means nothing on a command line
                raise CommandError(
                    f"{exc.message}; check the key (the admin's XSM browser lists and "
                    "searches the stored instances)"
                ) from exc
            except SnapshotCorruptError as exc:
                if exc.encrypted:  # intact data, keys missing: never suggest erasing it
                    raise CommandError(f"{exc.message}; {exc.hint}") from exc
                parked = operations.dead_letter_reasons([key]).get(key)
                why = f" The timer scanner parked it ({parked})." if parked else ""
                raise CommandError(
                    f"{exc.message}.{why} It cannot be shown; erase it with "
                    f"`manage.py xsm_forget {key}` or restore it from a backup"
                ) from exc
        if options["json"]:
            self.stdout.write(_json(data, indent=2))
            return
        for line in render(data):
            self.stdout.write(line)


def _due(ms: int) -> str:
    return f"in {format_duration(ms)}" if ms >= 0 else f"overdue {format_duration(-ms)}"


def _failure(failure: dict[str, Any]) -> str:
    state = (
        "DEAD-LETTERED"
        if failure["dead_lettered"]
        else f"next attempt {failure['next_attempt_at']}"
    )
    return f"failed {failure['attempts']}x, {state}: {failure['error']}"


def render(data: dict[str, Any]) -> list[str]:
    """The text form of :func:`operations.inspect_instance`'s result."""
    machine = data["machine"] or f"{data['machine_id']} (not configured)"
    lines = [
        data["key"],
        f"  machine       {machine}  (id {data['machine_id']}, "
        f"version {data['machine_version'] or '-'})",
        f"  state         {_json(data['value'])}  [{data['status']}]",
        f"  state ids     {', '.join(data['state_ids']) or '-'}",
        f"  version       {data['version']}  (updated {data['updated_at']})",
        f"  lock          {'held' if data['locked'] else 'free'}",
    ]
    if data["problem"]:
        lines.append(f"  problem       {data['problem']}")
    lines.append("  context       (redacted)")
    lines += [f"    {line}" for line in _json(data["context"], indent=2).splitlines()]
    if data["instance_failure"]:
        lines.append(f"  timers        {_failure(data['instance_failure'])}")
    lines.append(f"  deadlines     {len(data['deadlines']) or 'none'}")
    for d in data["deadlines"]:
        lines.append(f"    {d['event']}  due {d['due_at']} ({_due(d['due_in_ms'])})")
        if d["failure"]:
            lines.append(f"      {_failure(d['failure'])}")
        elif d["dead_lettered"]:
            lines.append("      DEAD-LETTERED (the instance could not be opened)")
    lines.append(f"  transitions   last {len(data['transitions'])}")
    for t in data["transitions"]:
        by = f" by {t['actor']}" if t["actor"] else ""
        why = f" ({t['reason']})" if t["reason"] else ""
        refused = "" if t["accepted"] else "  [refused]"
        lines.append(
            f"    #{t['seq']} v{t['version']} {t['at']}  {t['event']}  "
            f"{_json(t['from'])} -> {_json(t['to'])}{by}{why}{refused}"
        )
        if t["payload"]:
            lines.append(f"      payload {_json(t['payload'])}")
    return lines
