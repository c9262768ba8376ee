"""xsm_scan_timers in-process: one pass, --dry-run, --machine, --limit,
--lock, failures and dead letters, the loop, and every bad argument."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm import backend as stores
from django_xsm import operations
from django_xsm.management.commands import xsm_scan_timers
from django_xsm.registry import machines
from tests.django.commands.conftest import arm, fires, run

SUMMARY = re.compile(
    r"scanned=(\d+) fired=(\d+) stale=(\d+) locked=(\d+) dead_lettered=(\d+) errors=(\d+) "
    r"unavailable=(\d+) max_lag_ms=(\d+)"
)


def counts(text: str) -> dict[str, int]:
    found = SUMMARY.findall(text)
    assert found, text
    names = (
        "scanned", "fired", "stale", "locked", "dead_lettered", "errors", "unavailable",
        "max_lag_ms",
    )  # fmt: skip
    return dict(zip(names, map(int, found[-1]), strict=True))


def test_one_pass_fires_every_due_timer_once(backend: Any):
    for n in range(3):
        arm(f"alarm:{n}", overdue_ms=4000)
    arm("alarm:later", overdue_ms=-60_000)  # due in a minute
    result = counts(run("xsm_scan_timers").out)
    assert result["scanned"] == 3 and result["fired"] == 3 and result["errors"] == 0
    assert result["max_lag_ms"] >= 4000
    objects = machines["alarm"].objects
    for n in range(3):
        view = objects.get(f"alarm:{n}")
        assert view.value == "rung" and view.context["rings"] == 1
        assert fires(f"alarm:{n}") == 1
    assert objects.get("alarm:later").value == "waiting"
    again = counts(run("xsm_scan_timers").out)
    assert again["scanned"] == 0 and again["fired"] == 0


def test_verbosity(backend: Any):
    arm("alarm:v", overdue_ms=2000)
    arm("alarm:w", overdue_ms=2000)
    assert run("xsm_scan_timers", "-v", "0").out == ""
    arm("alarm:x", overdue_ms=3000)
    out = run("xsm_scan_timers", "-v", "2").out
    assert re.search(r"^fired alarm:x \(lag \d+s\d*m?s?", out, re.M), out
    assert counts(out)["fired"] == 1


def test_limit_caps_a_pass(backend: Any):
    for n in range(3):
        arm(f"alarm:{n}", overdue_ms=3000 + 1000 * n)
    out = run("xsm_scan_timers", "--limit", "2", "-v", "2").out
    assert counts(out)["fired"] == 2
    assert "the --limit of 2 was reached; more may be due" in out
    # earliest due first: the most overdue two went first
    assert machines["alarm"].objects.get("alarm:0").value == "waiting"
    assert counts(run("xsm_scan_timers", "--limit", "2").out)["fired"] == 1


def test_machine_filter(backend: Any):
    # faulty instances are more overdue: they fill the head of the shared
    # due index, and --machine alarm must look past them.
    for n in range(5):
        arm(f"faulty:{n}", "faulty", overdue_ms=9000)
    arm("alarm:1", overdue_ms=3000)
    arm("alarm:2", overdue_ms=3000)
    out = run("xsm_scan_timers", "--machine", "alarm", "--limit", "2").out
    assert counts(out)["fired"] == 2 and counts(out)["errors"] == 0
    record = stores.get_store().load("faulty:0")
    assert record is not None and not record.timer_failures  # never touched


def test_unknown_machine_lists_the_known_ones(backend: Any):
    with pytest.raises(CommandError) as info:
        run("xsm_scan_timers", "--machine", "nope")
    assert "Unknown machine 'nope' (registered: alarm, faulty, order, ticket)" in str(info.value)
    with pytest.raises(CommandError, match="Unknown machine 'nope'"):
        run("xsm_scan_timers", "--machine", "nope", "--dry-run")


def test_failed_fire_exits_non_zero_then_dead_letters(backend: Any):
    arm("faulty:1", "faulty")
    arm("alarm:1")
    out, err = _failing_run()
    assert counts(out) == {**counts(out), "scanned": 2, "fired": 1, "errors": 1}
    assert "1 timer fire(s) failed (faulty:1)" in err
    # MAX_ATTEMPTS is 2 in these tests (and no backoff): the next pass
    # dead-letters it.
    out, err = _failing_run()
    assert counts(out)["dead_lettered"] == 1 and counts(out)["errors"] == 1
    assert [k for k, _ in stores.get_store().dead_letters()] == ["faulty:1"]
    # parked: later passes leave it alone and succeed; --dry-run lists it
    assert counts(run("xsm_scan_timers").out)["scanned"] == 0
    listed = run("xsm_scan_timers", "--dry-run").out.splitlines()
    assert re.fullmatch(
        r"dead-lettered faulty:1  faulty  since \S+Z  \(.*the bell is broken\)", listed[0]
    ), listed
    assert listed[1] == "0 instance(s) due, 1 with dead-lettered timers (dry run: nothing fired)"
    assert operations.dead_letters(machine="alarm") == []
    assert [k for k, _m, _t in operations.dead_letters(machine="faulty")] == ["faulty:1"]
    data = operations.inspect_instance("faulty:1")
    assert data["dead_lettered"] is True
    assert data["deadlines"][0]["failure"]["error"] == "RuntimeError: the bell is broken"


def _failing_run() -> tuple[str, str]:
    import io

    from django.core.management import call_command

    out = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("xsm_scan_timers", stdout=out)
    assert info.value.returncode == 1
    return out.getvalue(), str(info.value)


def test_pessimistic_lock_counts_locked_instances(backend: Any):
    arm("alarm:busy")
    arm("alarm:free")
    with stores.get_store().lock("alarm:busy", timeout=1.0):
        out = run("xsm_scan_timers", "--lock", "pessimistic").out
    result = counts(out)
    assert result["locked"] == 1 and result["fired"] == 1 and result["errors"] == 0
    assert machines["alarm"].objects.get("alarm:busy").value == "waiting"
    assert counts(run("xsm_scan_timers", "--lock", "optimistic").out)["fired"] == 1


def test_dry_run_lists_and_fires_nothing(backend: Any):
    arm("alarm:a", overdue_ms=7000)
    arm("faulty:b", "faulty", overdue_ms=3000)
    arm("alarm:later", overdue_ms=-60_000)
    out = run("xsm_scan_timers", "--dry-run").out
    lines = out.splitlines()
    assert re.match(r"alarm:a  alarm  due \d{4}-\d\d-\d\dT[\d:.]+Z  lag 7s", lines[0]), lines
    assert lines[1].startswith("faulty:b  faulty  due ")
    assert lines[-1] == "2 instance(s) due, 0 with dead-lettered timers (dry run: nothing fired)"
    assert fires("alarm:a") == 0 and fires("faulty:b") == 0
    only = run("xsm_scan_timers", "--dry-run", "--machine", "faulty").out
    assert only.splitlines()[0].startswith("faulty:b ") and "1 instance(s) due," in only
    due = operations.due_timers(limit=1)
    assert [d.key for d in due] == ["alarm:a"] and due[0].to_dict()["machine"] == "alarm"


def test_dry_run_of_nothing(backend: Any):
    out = run("xsm_scan_timers", "--dry-run").out
    assert out == "0 instance(s) due, 0 with dead-lettered timers (dry run: nothing fired)\n"


def test_loop_runs_passes_until_stopped(backend: Any, monkeypatch: pytest.MonkeyPatch):
    real = operations.run_scanner
    passes: list[Any] = []

    def stop_after_first_fire(**kwargs: Any) -> Any:
        on_pass = kwargs["on_pass"]

        def watch(result: Any, message: str | None) -> None:
            on_pass(result, message)
            passes.append(result)
            if result.fired:
                kwargs["stop"].set()
            elif len(passes) == 1:
                arm("alarm:loop")  # armed after the first (empty) pass

        return real(**{**kwargs, "on_pass": watch})

    monkeypatch.setattr(xsm_scan_timers.operations, "run_scanner", stop_after_first_fire)
    out = run("xsm_scan_timers", "--loop", "--interval", "10ms", "-v", "2").out
    assert out.startswith("Scanning every 10ms (at most 1000 instances per pass)")
    assert "fired alarm:loop" in out
    assert re.search(r"^Stopped after \d+ pass\(es\): scanned=1 fired=1 ", out, re.M), out
    assert fires("alarm:loop") == 1


def test_run_scanner_stops_between_instances(backend: Any):
    for n in range(4):
        arm(f"alarm:{n}")
    stop = threading.Event()
    seen: list[str] = []

    def on_fire(key: str, outcome: Any) -> None:
        seen.append(key)
        if len(seen) == 2:
            stop.set()  # as the SIGTERM handler does

    outcome = operations.run_scanner(stop=stop, interval_s=0.01, on_fire=on_fire)
    assert outcome.passes == 1 and outcome.total.fired == 2 and len(seen) == 2


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--limit", "0"], "Invalid --limit 0: give a whole number from 1 to 100000"),
        (["--limit", "-3"], "Invalid --limit -3"),
        (["--limit", "ten"], "Invalid --limit 'ten'"),
        (["--limit", "100001"], "Invalid --limit 100001"),
        (["--interval", "0s"], "Invalid --interval '0s': must be more than zero"),
        (["--interval", "2h"], "Invalid --interval '2h': at most 1h is accepted"),
        (["--interval", "1"], "use a whole number with a unit: 30d, 12h, 15m, 90s, 500ms"),
        (["--interval=-1s"], "durations are positive"),
        (["--lock", "sometimes"], "argument --lock: invalid choice: 'sometimes'"),
        (["--dry-run", "--loop"], "--dry-run lists what is due once; drop --loop"),
        (["extra"], "unrecognized arguments: extra"),
    ],
)
def test_bad_arguments(backend: Any, args: list[str], fragment: str):
    with pytest.raises(CommandError) as info:
        run("xsm_scan_timers", *args)
    assert fragment in str(info.value)


def test_summary_format():
    from django_xsm.persistence.timers import ScanResult

    text = xsm_scan_timers.summary(ScanResult(3, 2, 1, 0, 0, 0, 12, unavailable=1))
    assert text == (
        "scanned=3 fired=2 stale=1 locked=0 dead_lettered=0 errors=0 unavailable=1 max_lag_ms=12"
    )


def test_key_prefix_limits_a_pass_to_keys_starting_with_it(backend: Any):
    arm("alarm:eu-1")
    arm("alarm:eu-2")
    arm("alarm:us-1")
    out = run("xsm_scan_timers", "--key-prefix", "alarm:eu-").out
    assert counts(out)["fired"] == 2
    assert (fires("alarm:eu-1"), fires("alarm:eu-2"), fires("alarm:us-1")) == (1, 1, 0)
    dry = run("xsm_scan_timers", "--dry-run", "--key-prefix", "alarm:us").out
    assert "alarm:us-1" in dry and "alarm:eu" not in dry
    assert counts(run("xsm_scan_timers", "--key-prefix", "alarm:*").out)["scanned"] == 0


def test_a_parked_unreadable_record_is_listed_with_its_reason(backend: Any):
    """The scanner parks a due key whose record cannot be read (it stops
    re-reading it every pass); --dry-run lists it with the reason."""
    arm("alarm:broken")
    layout = backend.store.layout
    backend.client.hset(layout.snapshot("alarm:broken"), "d", b"\xff not json")
    with pytest.raises(CommandError, match="alarm:broken"):
        run("xsm_scan_timers")  # a person must look: exit 1, and the key is parked
    assert counts(run("xsm_scan_timers").out)["scanned"] == 0  # not re-read every pass
    dry = run("xsm_scan_timers", "--dry-run").out
    [line] = [x for x in dry.splitlines() if x.startswith("dead-lettered alarm:broken")]
    assert "(" in line and line.endswith(")")  # the reason, e.g. why it could not be read


def test_redrive_gives_a_dead_timer_its_attempts_back(backend: Any):
    arm("faulty:2", "faulty")
    _failing_run()
    _failing_run()  # MAX_ATTEMPTS 2: dead-lettered now
    assert [k for k, _ in stores.get_store().dead_letters()] == ["faulty:2"]
    assert run("xsm_scan_timers", "--redrive", "faulty:2").out == "redriven faulty:2\n"
    assert stores.get_store().dead_letters() == []
    assert not stores.get_store().load("faulty:2").timer_failures
    out, _ = _failing_run()  # the next pass fires it again (and it fails again)
    assert counts(out)["errors"] == 1 and counts(out)["scanned"] == 1


def test_redrive_of_a_key_without_a_dead_timer_exits_non_zero(backend: Any):
    arm("alarm:fine")
    with pytest.raises(
        CommandError, match="2 key\\(s\\) had no dead-lettered timer: alarm:fine, alarm:nope"
    ):
        run("xsm_scan_timers", "--redrive", "alarm:fine", "--redrive", "alarm:nope")
    with pytest.raises(CommandError, match="drop --loop"):
        run("xsm_scan_timers", "--redrive", "alarm:fine", "--loop")
