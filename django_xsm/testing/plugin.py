"""django-xsm's pytest plugin (the ``pytest11`` entry point ``django_xsm``):
the ``xsm`` fixture and chart coverage.

Installed with django-xsm, pytest loads it by itself (``-p no:django_xsm``
turns it off). Loading it costs nothing: it imports Django and the rest
of django-xsm only when a test asks for ``xsm`` or the session for
coverage.

* ``xsm`` (function scope): :class:`~django_xsm.testing.helper.Xsm`.
* ``--xsm-coverage``: at the end of the session, per registered machine,
  the states entered and the transitions taken out of all of them, and
  those never entered or taken (:mod:`.coverage`). Under ``pytest -n``
  each process counts what it ran and sends it to the controller, which
  merges them.
* ``--xsm-coverage-fail-under=PCT`` (implies ``--xsm-coverage``): the
  session fails when fewer than PCT percent of the transitions were taken.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .coverage import ChartCoverage, MachineCoverage
    from .helper import Xsm

#: The key of a ``pytest -n`` worker's coverage in its ``workeroutput``.
_OUTPUT = "xsm_coverage"


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text} is not a percentage from 0 to 100")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("django-xsm", "django-xsm chart coverage")
    group.addoption(
        "--xsm-coverage",
        action="store_true",
        default=False,
        help="Report, per registered machine, the states entered and the transitions "
        "taken during the tests, and those never entered or taken.",
    )
    group.addoption(
        "--xsm-coverage-fail-under",
        type=_percent,
        default=None,
        metavar="PCT",
        help="Fail the session when less than PCT percent of the charts' transitions "
        "were taken (implies --xsm-coverage).",
    )


def pytest_configure(config: pytest.Config) -> None:
    fail_under = config.getoption("xsm_coverage_fail_under")
    if config.getoption("xsm_coverage") or fail_under is not None:
        config.pluginmanager.register(CoverageReport(config, fail_under), "django_xsm-coverage")


@pytest.fixture
def xsm(request: pytest.FixtureRequest) -> Iterator[Xsm]:
    """A namespace of this test's own, a clock that moves only with
    ``xsm.advance()``, the outbox (``xsm.emitted``, ``xsm.deliver()``), the
    transition log (``xsm.history(key)``), and on-commit callbacks run as
    in production. See docs/testing.md."""
    from .helper import Xsm

    with Xsm(settings=_settings_fixture(request)) as found:
        yield found


def _settings_fixture(request: pytest.FixtureRequest) -> Any:
    """pytest-django's ``settings`` (set up before ``xsm``, so torn down
    after it), when it can give one: the test's ``XSM`` goes through it, so
    the settings a test changes through it come back in order. None
    without pytest-django or Django settings (``Xsm`` says what is missing)."""
    if not request.config.pluginmanager.hasplugin("django"):
        return None
    from django.conf import settings

    if not settings.configured:
        return None
    return request.getfixturevalue("settings")


class CoverageReport:
    """Counts from the first test on, reports (and fails) at the end."""

    def __init__(self, config: pytest.Config, fail_under: float | None) -> None:
        from .coverage import ChartCoverage

        self.config = config
        self.fail_under = fail_under
        self.worker = hasattr(config, "workerinput")
        self.counter: ChartCoverage = ChartCoverage()
        self.counter.start()
        self.from_workers: list[list[MachineCoverage]] = []
        self.found: list[MachineCoverage] | None = None
        self.problem = ""

    def pytest_unconfigure(self) -> None:
        self.counter.stop()

    def _measure(self) -> list[MachineCoverage]:
        """This process's counts for every machine the registry names."""
        from django.conf import settings

        if not settings.configured:
            self.problem = "Django settings are not configured: no registered machines to report"
            return []
        from django_xsm.registry import machines

        entries = machines.values()
        if not entries:
            self.problem = "no machine is registered (XSM['MACHINES'])"
        return self.counter.measure((entry.name, entry.machine) for entry in entries)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """A ``pytest -n`` worker finished: keep what it counted."""
        from .coverage import MachineCoverage

        data = getattr(node, "workeroutput", {}).get(_OUTPUT)
        if data is not None:
            self.from_workers.append([MachineCoverage.from_data(d) for d in data["machines"]])
            self.problem = self.problem or str(data.get("problem", ""))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        yield
        from .coverage import merge_all, total_percent

        if self.worker:  # sent to the controller with the worker's end
            found = self._measure()
            self.config.workeroutput[_OUTPUT] = {  # type: ignore[attr-defined]
                "machines": [m.to_data() for m in found],
                "problem": self.problem,
            }
            return
        if self.config.pluginmanager.getplugin("dsession") is not None:
            self.found = merge_all(self.from_workers)
        else:
            self.found = self._measure()
        if self.fail_under is not None and total_percent(self.found) < self.fail_under:
            session.testsfailed += 1  # the exit status says so, as pytest-cov does

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from .coverage import report_lines, total_percent

        if self.worker or self.found is None:
            return
        write = terminalreporter.write_line
        terminalreporter.write_sep("-", "django-xsm chart coverage")
        if self.problem:
            write(self.problem)
        for line in report_lines(self.found):
            write(line)
        if self.fail_under is None:
            return
        total = total_percent(self.found)
        if total < self.fail_under:
            write(
                f"FAIL: chart transition coverage {total:.1f}% is below "
                f"--xsm-coverage-fail-under={self.fail_under:g}",
                red=True,
                bold=True,
            )
        else:
            write(f"chart transition coverage {total:.1f}% reaches {self.fail_under:g}%")
