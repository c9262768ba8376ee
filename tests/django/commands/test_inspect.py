"""xsm_inspect: text and JSON views of one instance, redaction, deadlines
with failures and dead letters, raw snapshots, and bad arguments."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm import backend as stores
from django_xsm import operations
from django_xsm.registry import machines
from tests.django.commands.conftest import arm, run
from tests.redis.helpers import layout_of


@pytest.fixture
def alarm(backend: Any) -> str:
    with machines["alarm"].objects.open("alarm:7", actor="ann") as block:
        block.send("SNOOZE", reason="tired", password="hunter2", minutes=5)
    machines["alarm"].objects.send("alarm:7", "SNOOZE", actor="bob")
    return "alarm:7"


def test_text(alarm: str):
    out = run("xsm_inspect", alarm).out
    lines = out.splitlines()
    assert lines[0] == "alarm:7"
    assert re.match(r"  machine +alarm  \(id alarm, version -\)$", lines[1]), lines[1]
    assert '  state         "waiting"  [active]' in lines
    assert "  state ids     alarm, alarm.waiting" in lines
    assert re.search(r"^  version       2  \(updated \d{4}-\d\d-\d\dT[\d:.]+Z\)$", out, re.M)
    assert "  lock          free" in lines
    assert '"api_token": "[redacted]"' in out and "s3cr3t" not in out
    assert '"owner": "ann"' in out
    due = r"^    xstate\.after\.1000\.alarm\.waiting  due \S+Z \((in|overdue) [\dms]+\)$"
    assert re.search(due, out, re.M), out
    assert "  transitions   last 2" in lines
    first = r'^    #1 v1 \S+Z  SNOOZE  "waiting" -> "waiting" by ann \(tired\)$'
    assert re.search(first, out, re.M), out
    assert '      payload {"password": "[redacted]", "minutes": 5}' in lines
    assert "hunter2" not in out


def test_json(alarm: str):
    data = json.loads(run("xsm_inspect", alarm, "--json", "--log", "1").out)
    assert data["key"] == alarm and data["machine"] == "alarm" and data["machine_id"] == "alarm"
    assert data["value"] == "waiting" and data["state_ids"] == ["alarm", "alarm.waiting"]
    assert data["version"] == 2 and data["status"] == "active" and data["locked"] is False
    assert data["context"] == {"rings": 0, "owner": "ann", "api_token": "[redacted]"}
    [deadline] = data["deadlines"]
    assert deadline["event"] == "xstate.after.1000.alarm.waiting"
    assert deadline["failure"] is None and deadline["dead_lettered"] is False
    assert 0 < deadline["due_in_ms"] <= 1000
    assert data["dead_lettered"] is False and data["problem"] is None
    assert [t["seq"] for t in data["transitions"]] == [2]
    assert data["transitions"][0]["actor"] == "bob"
    assert json.loads(run("xsm_inspect", alarm, "--json", "--log", "0").out)["transitions"] == []


def test_redact_setting_adds_fragments(xsm: Any, backend: Any):
    xsm(AUDIT={"REDACT": ["owner"]})
    arm("alarm:r")
    assert operations.inspect_instance("alarm:r")["context"]["owner"] == "[redacted]"


def test_failures_and_dead_letters(backend: Any):
    arm("faulty:1", "faulty")
    with pytest.raises(CommandError):
        run("xsm_scan_timers")
    out = run("xsm_inspect", "faulty:1").out
    assert re.search(
        r"^      failed 1x, next attempt \S+Z: RuntimeError: the bell is broken$", out, re.M
    ), out
    with pytest.raises(CommandError):
        run("xsm_scan_timers")  # the second failure dead-letters it (MAX_ATTEMPTS 2)
    out = run("xsm_inspect", "faulty:1").out
    assert "      failed 2x, DEAD-LETTERED: RuntimeError: the bell is broken" in out
    assert re.search(r"due \S+Z \(overdue \d+s", out)
    data = json.loads(run("xsm_inspect", "faulty:1", "--json").out)
    assert data["dead_lettered"] is True and data["deadlines"][0]["dead_lettered"] is True
    assert data["deadlines"][0]["failure"]["attempts"] == 2


def test_held_lock(alarm: str):
    with stores.get_store().lock(alarm):
        assert "  lock          held" in run("xsm_inspect", alarm).out.splitlines()


def test_machine_not_configured_shows_the_raw_snapshot(backend: Any):
    snapshot = {"machine_id": "ghost", "value": {"a": "b"}, "context": {"pin": 1234, "n": 1}}
    stores.get_store().save("ghost:1", snapshot, expected_version=0)
    data = operations.inspect_instance("ghost:1")
    assert data["machine"] is None and data["machine_id"] == "ghost"
    assert data["value"] == {"a": "b"} and data["state_ids"] == []
    assert data["context"] == {"pin": "[redacted]", "n": 1}
    assert data["problem"] == "machine 'ghost' is not in XSM['MACHINES']; showing the raw snapshot"
    out = run("xsm_inspect", "ghost:1").out
    assert "  machine       ghost (not configured)  (id ghost, version -)" in out
    assert "  problem       machine 'ghost' is not in XSM['MACHINES']" in out


def test_snapshot_the_machine_cannot_restore(backend: Any):
    snapshot = {"machine_id": "alarm", "value": "nowhere", "context": {}}
    stores.get_store().save("alarm:bad", snapshot, expected_version=0)
    data = operations.inspect_instance("alarm:bad")
    assert data["machine"] == "alarm" and data["value"] == "nowhere"
    assert data["problem"].startswith("the configured machine cannot restore it (")


def test_unknown_key(backend: Any):
    with pytest.raises(CommandError) as info:
        run("xsm_inspect", "alarm:none")
    assert "Instance 'alarm:none' does not exist" in str(info.value)
    assert "create=True" not in str(info.value)  # meaningless on a command line
    assert "check the key" in str(info.value)
    assert info.value.returncode == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "the following arguments are required: KEY"),
        (["bad\x01key"], "contains control characters"),
        (["alarm:7", "--log", "1001"], "Invalid --log 1001: give a whole number from 0 to 1000"),
        (["alarm:7", "--log=-1"], "Invalid --log -1"),
        (["alarm:7", "--log", "all"], "Invalid --log 'all'"),
        (["alarm:7", "alarm:8"], "unrecognized arguments: alarm:8"),
    ],
)
def test_bad_arguments(alarm: str, args: list[str], fragment: str):
    with pytest.raises(CommandError) as info:
        run("xsm_inspect", *args)
    assert fragment in str(info.value)


def damage(key: str) -> None:
    store = stores.get_store()
    layout = layout_of(store)
    store.client.hset(layout.snapshot(key), mapping={"d": b"{not json", "v": "1"})


def test_damaged_record(backend: Any):
    damage("alarm:junk")
    with pytest.raises(CommandError) as info:
        run("xsm_inspect", "alarm:junk")
    assert str(info.value).startswith("Snapshot of 'alarm:junk' (version 1) is not valid JSON")
    assert "cannot be shown; erase it with `manage.py xsm_forget alarm:junk`" in str(info.value)


def test_a_record_the_scanner_parked_says_why(backend: Any):
    arm("alarm:parked")
    damage("alarm:parked")
    with pytest.raises(CommandError):
        run("xsm_scan_timers")  # parks it
    with pytest.raises(CommandError) as info:
        run("xsm_inspect", "alarm:parked")
    assert "The timer scanner parked it (" in str(info.value)
    assert "xsm_forget alarm:parked" in str(info.value)
