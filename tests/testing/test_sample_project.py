"""The sample project of ``sample_project/``, a user's project testing the
demo's order chart (its own settings make the payment wait one hour), run
by pytest in a subprocess: the plugin comes from django-xsm's installed
``pytest11`` entry point, nothing names it. Its test module is the one
docs/testing.md shows. On the embedded fakeredis and, with
``XSM_REDIS_URL``, the live server; with and without ``pytest -n 2``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from django_xsm.redis import escape_glob
from tests.support import LIVE_URL

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).resolve().parent / "sample_project"
FLAVOURS = ["embedded", pytest.param("live", marks=pytest.mark.live)]
Run = Callable[..., subprocess.CompletedProcess[str]]


def missing(what: str) -> None:
    """Skip, or fail under CI (which installs the project afresh)."""
    if os.environ.get("CI"):
        pytest.fail(what)
    pytest.skip(what)


@pytest.fixture(scope="module")
def installed_plugin() -> None:
    found = [e for e in entry_points(group="pytest11") if e.name == "django_xsm"]
    if not found:
        missing(
            "the installed django-xsm declares no pytest11 entry point 'django_xsm' yet: "
            "reinstall it (pip install -e .)"
        )
    assert found[0].value == "django_xsm.testing.plugin"


@pytest.fixture(params=FLAVOURS)
def shop(request: pytest.FixtureRequest, installed_plugin: None) -> Run:
    """``shop(*pytest arguments)``: the sample project's pytest run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_"))}
    env.pop("SHOP_REDIS_URL", None)
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    if request.param == "live":
        if not LIVE_URL:
            pytest.skip("XSM_REDIS_URL is not set")
        env["SHOP_REDIS_URL"] = LIVE_URL

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
        found = subprocess.run(
            command, check=False, cwd=SAMPLE, env=env, capture_output=True, text=True, timeout=600
        )
        if request.param == "live":
            assert not leftovers(), "a test namespace was left on the server"
        return found

    return run


def leftovers() -> list[Any]:
    import redis

    client = redis.Redis.from_url(LIVE_URL)
    try:
        return list(client.scan_iter(match=f"{{{escape_glob('sample-shop-test-')}*", count=1000))
    finally:
        client.close()


def summary(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def coverage_report(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "django-xsm chart coverage" in line)
    return lines[start + 1 : next(i for i, line in enumerate(lines) if line.startswith("total:"))]


EXPECTED = [
    "order: states 6/7 (85.7%), transitions 6/12 (50.0%)",
    "  never entered: shipped",
    "  never taken: cart --CANCEL--> cancelled",
    "  never taken: awaiting_payment --CANCEL--> cancelled",
    "  never taken: paid --SHIP--> shipped",
    "  never taken: shipping --WAREHOUSE_CONFIRMED--> shipped",
    "  never taken: shipping_failed --SWITCH_WAREHOUSE--> (no target)",
    "  never taken: shipping_failed --WAREHOUSE_CONFIRMED--> shipped",
]


def test_its_tests_pass_with_the_plugin_of_the_entry_point_and_coverage_is_counted(
    shop: Run,
) -> None:
    result = shop("-p", "no:xdist", "--xsm-coverage-fail-under=50")
    assert result.returncode == 0, summary(result)
    assert re.search(r"\b7 passed\b", result.stdout), summary(result)
    assert coverage_report(result.stdout) == EXPECTED
    assert "total: transitions 6/12 (50.0%)" in result.stdout
    assert "chart transition coverage 50.0% reaches 50%" in result.stdout


def test_fail_under_fails_the_session_when_a_transition_is_missing(shop: Run) -> None:
    result = shop("-p", "no:xdist", "--xsm-coverage-fail-under=100")
    assert result.returncode == 1, summary(result)
    assert re.search(r"\b7 passed\b", result.stdout)  # every test passed: coverage failed
    assert (
        "FAIL: chart transition coverage 50.0% is below --xsm-coverage-fail-under=100"
        in result.stdout
    )


def test_under_xdist_each_process_counts_and_the_controller_merges(shop: Run) -> None:
    try:
        import xdist  # noqa: F401
    except ImportError:
        missing("pytest-xdist is not installed (the test extra has it)")
    result = shop("-p", "xdist", "-n", "2", "-vv", "--xsm-coverage-fail-under=100")
    assert result.returncode == 1, summary(result)
    assert re.search(r"\b7 passed\b", result.stdout), summary(result)
    assert "[gw0]" in result.stdout and "[gw1]" in result.stdout  # both processes ran tests
    assert coverage_report(result.stdout) == EXPECTED
    assert "FAIL: chart transition coverage 50.0%" in result.stdout


def test_bad_use_gets_clear_errors(installed_plugin: None, tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (tmp_path / "bare_settings.py").write_text(
        'SECRET_KEY = "x"\nINSTALLED_APPS = ["django.contrib.contenttypes"]\n'
        'DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}\n'
    )
    (tmp_path / "test_it.py").write_text("def test_it(xsm):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_"))}
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
        return subprocess.run(
            command, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    without_app = run("--ds=bare_settings")
    assert without_app.returncode == 1, summary(without_app)
    assert "'django_xsm' is not in INSTALLED_APPS" in without_app.stdout
    assert "add 'django_xsm' to INSTALLED_APPS" in without_app.stdout
    without_django = run("-p", "no:django")
    assert without_django.returncode == 1, summary(without_django)
    assert "Django settings are not configured" in without_django.stdout
    bad_percent = run("-p", "no:django", "--xsm-coverage-fail-under=abc")
    assert bad_percent.returncode == 4, summary(bad_percent)
    assert "'abc' is not a number" in bad_percent.stderr
    too_much = run("-p", "no:django", "--xsm-coverage-fail-under=101")
    assert too_much.returncode == 4 and "101 is not a percentage from 0 to 100" in too_much.stderr


@pytest.mark.parametrize("name", ["shop_settings.py", "test_orders.py", "test_orders_unittest.py"])
def test_the_docs_show_the_sample_projects_files(name: str) -> None:
    docs = (ROOT / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", docs, flags=re.S)
    assert (SAMPLE / name).read_text() in blocks, f"docs/testing.md must show {name} as it is"
