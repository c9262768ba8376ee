"""xsm_scan_timers as real processes: three daemons on one live Redis fire
each timer exactly once, stop cleanly on SIGTERM/SIGINT, and a one-shot
run's exit status tells cron whether a fire failed."""

from __future__ import annotations

import re
import signal
from typing import Any

import pytest

from django_xsm import backend as stores
from django_xsm.registry import machines
from tests.django.commands.conftest import arm, fires, wait_for
from tests.support import LIVE_URL, live_only

pytestmark = pytest.mark.timeout(180)

FIRED = re.compile(r"^Stopped on SIG\w+ after \d+ pass\(es\): scanned=\d+ fired=(\d+) ", re.M)


@pytest.fixture
def live(request: pytest.FixtureRequest, xsm: Any) -> Any:
    """This process on the live server, under a fresh prefix."""
    import uuid

    from tests.support import delete_namespace

    if not LIVE_URL:
        pytest.skip("XSM_REDIS_URL is not set")
    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    xsm(REDIS_URL=LIVE_URL, PREFIX=prefix, EMBEDDED=None)
    backend = stores.get_backend()
    yield prefix
    delete_namespace(backend.client, prefix)


@live_only
@pytest.mark.live
def test_three_scanner_processes_fire_each_timer_exactly_once(live: str, manage: Any):
    scanners = [
        manage(live, "xsm_scan_timers", "--loop", "--interval", "5ms", "-v", "2", url=LIVE_URL)
        for _ in range(3)
    ]
    for scanner in scanners:  # all three are polling before anything is due
        wait_for(lambda s=scanner: s.has("Scanning every 5ms"), 60, "the scanners to start")
    keys = [f"alarm:{n}" for n in range(60)]
    for key in keys:
        arm(key, overdue_ms=1000)
    objects = machines["alarm"].objects
    wait_for(lambda: all(objects.get(k).value == "rung" for k in keys), 30, "every alarm to ring")
    totals = []
    for scanner in scanners:
        scanner.proc.send_signal(signal.SIGTERM)
    for scanner in scanners:
        code, out, err = scanner.finish(timeout=60)
        assert code == 0, (out, err)
        assert "Traceback" not in err, err
        found = FIRED.search(out)
        assert found, (out, err)
        totals.append(int(found.group(1)))
    assert sum(totals) == 60
    for key in keys:
        assert fires(key) == 1, key
        assert objects.get(key).context["rings"] == 1, key


@live_only
@pytest.mark.live
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_daemon_stops_cleanly_on_signal(live: str, manage: Any, sig: signal.Signals):
    scanner = manage(live, "xsm_scan_timers", "--loop", "--interval", "20ms", url=LIVE_URL)
    wait_for(lambda: scanner.has("Scanning every 20ms"), 60, "the scanner to start")
    arm("alarm:sig")
    wait_for(lambda: fires("alarm:sig") == 1, 60, "the alarm to ring")
    scanner.proc.send_signal(sig)
    code, out, err = scanner.finish(timeout=60)
    assert code == 0, (out, err)
    assert f"Stopped on {sig.name} after " in out, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


@live_only
@pytest.mark.live
def test_one_shot_exit_status(live: str, manage: Any):
    arm("alarm:ok")
    code, out, err = manage(live, "xsm_scan_timers", url=LIVE_URL).finish()
    assert code == 0, err
    assert "scanned=1 fired=1 " in out
    arm("faulty:bad", "faulty")
    code, out, err = manage(live, "xsm_scan_timers", url=LIVE_URL).finish()
    assert code == 1
    assert "errors=1" in out
    assert "CommandError: 1 timer fire(s) failed (faulty:bad)" in err
    assert "Traceback" not in err


def test_bad_argument_exit_status(manage: Any):
    """From a shell, argparse reports a bad argument with usage and exit 2."""
    code, _out, err = manage("xsmtest", "xsm_purge_logs", "--older-than", "30x").finish()
    assert code == 2
    assert "error: argument --older-than: Invalid --older-than '30x': use a whole number" in err
