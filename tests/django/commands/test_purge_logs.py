"""xsm_purge_logs: removes only old records, pages through long logs,
--machine, --dry-run, progress on a terminal, and every bad argument."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.management.base import CommandError

from django_xsm import backend as stores
from django_xsm import operations
from django_xsm.exceptions import InvalidConfigError
from django_xsm.registry import machines
from tests.django.commands.conftest import at_time, run

DAY_MS = 86_400_000


def bump(key: str, times: int = 1, *, days_ago: int = 0) -> None:
    with at_time(days_ago * DAY_MS):
        with machines["ticket"].objects.open(key) as block:
            for _ in range(times):
                block.send("BUMP")


def history(key: str) -> list[int]:
    return [r.seq for r in stores.get_log().read(key)]


@pytest.fixture
def logs(backend: Any) -> None:
    bump("ticket:1", 3, days_ago=40)
    bump("ticket:1", 2)
    bump("ticket:2", 1, days_ago=31)
    with at_time(45 * DAY_MS):
        with machines["alarm"].objects.open("alarm:1") as block:
            block.send("SNOOZE")
            block.send("SNOOZE")


def test_removes_only_records_older_than_the_cutoff(logs: None):
    out = run("xsm_purge_logs", "--older-than", "30d").out
    assert re.fullmatch(
        r"Removed 6 transition record\(s\) from 3 log\(s\) \(older than 30d, before "
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\)\n",
        out,
    ), out
    assert history("ticket:1") == [4, 5]
    assert history("ticket:2") == [] and history("alarm:1") == []
    assert machines["ticket"].objects.get("ticket:1").context["count"] == 5  # state untouched
    assert run("xsm_purge_logs", "--older-than", "30d").out.startswith("Nothing to remove (")


def test_a_shorter_age_reaches_newer_records(logs: None):
    assert "Removed 5 " in run("xsm_purge_logs", "--older-than", "35d").out
    assert history("ticket:2") == [1]
    assert "Removed 1 " in run("xsm_purge_logs", "--older-than", "1d").out


def test_dry_run_counts_and_removes_nothing(logs: None):
    out = run("xsm_purge_logs", "--older-than", "30d", "--dry-run").out
    assert out.startswith("Would remove 6 transition record(s) from 3 log(s) (older than 30d")
    assert out.rstrip().endswith("dry run: nothing removed)")
    assert history("ticket:1") == [1, 2, 3, 4, 5] and history("alarm:1") == [1, 2]
    report = operations.purge_logs(dt.timedelta(days=30), dry_run=True)
    assert (report.records, report.streams, report.dry_run) == (6, 3, True)


def test_machine_keeps_other_machines_logs(logs: None):
    out = run("xsm_purge_logs", "--older-than", "30d", "--machine", "alarm", "--dry-run").out
    assert out.startswith("Would remove 2 transition record(s) from 1 log(s)")
    out = run("xsm_purge_logs", "--older-than", "30d", "--machine", "ticket").out
    assert out.startswith("Removed 4 transition record(s) from 2 log(s)")
    assert history("alarm:1") == [1, 2]
    assert history("ticket:1") == [4, 5]


def test_logs_of_deleted_instances_go_without_machine(logs: None):
    stores.get_store().delete("ticket:2")  # the log stays with delete()
    assert "Removed 3 " in run("xsm_purge_logs", "--older-than", "30d", "--machine", "ticket").out
    assert history("ticket:2") == [1]
    assert "Removed 3 " in run("xsm_purge_logs", "--older-than", "30d").out
    assert history("ticket:2") == []


def test_before_a_moment(logs: None, settings: Any):
    moment = dt.datetime.now(dt.UTC) - dt.timedelta(days=35)
    stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    out = run("xsm_purge_logs", "--before", stamp, "--dry-run").out
    assert out == (
        f"Would remove 5 transition record(s) from 2 log(s) (before {stamp}; "
        "dry run: nothing removed)\n"
    ), out
    # without an offset: the current time zone
    settings.TIME_ZONE = "America/New_York"
    local = moment.astimezone(ZoneInfo("America/New_York")).replace(tzinfo=None)
    out = run("xsm_purge_logs", "--before", local.isoformat(timespec="milliseconds")).out
    assert out == f"Removed 5 transition record(s) from 2 log(s) (before {stamp})\n", out
    assert history("ticket:1") == [4, 5] and history("ticket:2") == [1]
    with pytest.raises(InvalidConfigError, match="naive datetime"):
        operations.purge_logs(dt.datetime(2026, 1, 1))


def test_pages_through_a_long_log(backend: Any):
    bump("ticket:long", 1234, days_ago=60)
    bump("ticket:long", 3)
    dry = operations.purge_logs(dt.timedelta(days=30), dry_run=True)
    assert (dry.records, dry.streams) == (1234, 1)
    assert operations.purge_logs(dt.timedelta(days=30)).records == 1234
    assert history("ticket:long") == [1235, 1236, 1237]


def test_progress_on_a_terminal_only(logs: None):
    plain = run("xsm_purge_logs", "--older-than", "30d", "--dry-run").out
    assert "\r" not in plain and "visited" not in plain
    shown = run("xsm_purge_logs", "--older-than", "30d", "--dry-run", tty=True).out
    assert "\r1 log(s) visited, " in shown  # the first update is immediate
    assert "\r\033[K" in shown  # the counter line is cleared before the report
    assert shown.rsplit("\033[K", 1)[1].startswith("Would remove 6 ")


def test_verbosity(logs: None):
    assert run("xsm_purge_logs", "--older-than", "30d", "-v", "0").out == ""
    bump("ticket:9", 2, days_ago=40)
    out = run("xsm_purge_logs", "--older-than", "30d", "-v", "2").out
    assert "ticket:9: removed 2\n" in out
    bump("ticket:8", 2, days_ago=2)
    out = run("xsm_purge_logs", "--older-than", "1d", "--dry-run", "-v", "2").out
    assert "ticket:8: would remove 2\n" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "one of the arguments --older-than --before is required"),
        (["--older-than", "30d", "--before", "2026-01-01"], "not allowed with argument"),
        (["--before", "yesterday"], "Invalid --before 'yesterday': give an ISO 8601 date"),
        (["--before", "2999-01-01T00:00Z"], "it is in the future"),
        (["--older-than", "30"], "Invalid --older-than '30': use a whole number with a unit"),
        (["--older-than", "30x"], "use a whole number with a unit: 30d, 12h, 15m, 90s, or"),
        (["--older-than", "1.5d"], "Invalid --older-than '1.5d'"),
        (["--older-than", "0d"], "must be more than zero"),
        (["--older-than=-5d"], "durations are positive"),
        (["--older-than", "500ms"], "milliseconds are not accepted here"),
        (["--older-than", "40000d"], "at most 36500d is accepted"),
        (["--older-than", "30d", "--machine", "nope"], "Unknown machine 'nope' (registered: "),
    ],
)
def test_bad_arguments(backend: Any, args: list[str], fragment: str):
    with pytest.raises(CommandError) as info:
        run("xsm_purge_logs", *args)
    assert fragment in str(info.value)
