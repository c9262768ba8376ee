"""A wrong ``XSM`` value in a project whose models use ``StatechartField``:
``manage.py check`` lists every problem as ``xsm.E001`` and exits 1, and
every command refuses to start with the same problems, never a traceback.

Each case runs ``manage.py`` in a subprocess, as cron and a shell do, on a
settings module written to ``tmp_path``: the test settings (their models
use the field: ``tests.fieldapp``) with ``XSM`` replaced.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (the XSM value as Python source, how many xsm.E001 it must give)
CASES = {
    "unknown key and wrong type": ('{**XSM, "BOGUS": 1, "LOCK_TIMEOUT_S": "nope"}', 2),
    "machines not a dict": ('{**XSM, "MACHINES": "nope"}', 1),
    "bad outbox pattern": ('{**XSM, "OUTBOX": {"HANDLERS": {"a..b": "x.y"}}}', 1),
    "not a dict": ('"nope"', 1),
    "malformed codec key": ('{**XSM, "CODEC_KEYS": ["short"]}', 1),
}


def manage(tmp_path: Path, xsm: str, *argv: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "bad_settings.py").write_text(
        f"from tests.django.settings import *  # noqa: F403\nXSM = {xsm}\n", encoding="utf-8"
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "bad_settings",
    }
    return subprocess.run(
        [sys.executable, "-m", "django", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
        timeout=120,
    )


def refused(done: subprocess.CompletedProcess[str], problems: int) -> str:
    """Assert a clean refusal (exit 1, no traceback) listing ``problems``
    settings errors; returns stderr."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(re.findall(r"\(xsm\.E001\)", done.stderr)) == problems, done.stderr
    return done.stderr


@pytest.mark.parametrize(("xsm", "problems"), CASES.values(), ids=list(CASES))
def test_check_lists_every_settings_problem_without_a_traceback(
    tmp_path: Path, xsm: str, problems: int
) -> None:
    err = refused(manage(tmp_path, xsm, "check"), problems)
    assert "SystemCheckError" in err
    # the field's own checks step aside: E001 says it, once
    assert "xsm.E101" not in err


@pytest.mark.parametrize(("xsm", "problems"), CASES.values(), ids=list(CASES))
def test_the_timer_scanner_refuses_to_start_with_the_same_problems(
    tmp_path: Path, xsm: str, problems: int
) -> None:
    refused(manage(tmp_path, xsm, "xsm_scan_timers"), problems)
    # cron lines often skip the checks: the command still says why, clearly
    err = refused(manage(tmp_path, xsm, "xsm_scan_timers", "--skip-checks"), problems)
    assert err.startswith("CommandError: XSM is invalid"), err


@pytest.mark.parametrize(
    "argv",
    [
        ("migrate",),
        ("xsm_run_outbox", "--skip-checks"),
        ("xsm_sync_models", "--skip-checks"),
        ("xsm_inspect", "order:1", "--skip-checks"),
    ],
    ids=" ".join,
)
def test_other_commands_refuse_to_start_with_the_same_problems(tmp_path: Path, argv: Any) -> None:
    xsm, problems = CASES["unknown key and wrong type"]
    err = refused(manage(tmp_path, xsm, *argv), problems)
    assert "XSM['BOGUS']" in err and "XSM['LOCK_TIMEOUT_S']" in err


def test_a_machine_module_that_raises_on_import_is_reported_not_raised(tmp_path: Path) -> None:
    """Start-up goes on (the registry keeps the problem): check names the
    error, for the registry entry (E007) and for each field using it (E101)."""
    (tmp_path / "broken_chart.py").write_text("machine = undefined_name\n", encoding="utf-8")
    xsm = '{**XSM, "MACHINES": {**XSM["MACHINES"], "parcel": "broken_chart.machine"}}'
    done = manage(tmp_path, xsm, "check")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    e101 = [line for line in done.stderr.splitlines() if "(xsm.E101)" in line]
    # Parcel.state, Shipment.delivery, TinyParcel.state use "parcel"
    assert len(e101) == 3, done.stderr
    for line in e101:
        assert "failed to load" in line and "NameError: name 'undefined_name'" in line
    assert "(xsm.E007)" in done.stderr
    assert 'python -c "import broken_chart"' in done.stderr
