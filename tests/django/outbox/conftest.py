"""Fixtures of the outbox tests.

Every test that takes ``backend`` runs on the embedded fakeredis and, with
``XSM_REDIS_URL``, again on the live server (tests/django/conftest.py: a
fresh prefix per test, its keys deleted afterwards). The emitting machines
of :mod:`tests.django.outbox.machines` are registered next to the test
project's, and ``XSM['OUTBOX']`` routes ``order.paid`` to ``record``,
``order.*`` to ``catch_all`` and ``mute.*`` to ``flaky`` unless a test
says otherwise (``outbox_settings``).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.management import call_command

from tests.django.outbox import handlers
from tests.django.outbox.machines import MACHINES
from tests.django.settings import XSM as BASE

HANDLERS = {
    "order.paid": "tests.django.outbox.handlers.record",
    "order.*": "tests.django.outbox.handlers.catch_all",
    "mute.*": "tests.django.outbox.handlers.flaky",
}


@pytest.fixture
def outbox_settings(xsm: Any) -> Callable[..., None]:
    """``outbox_settings(HANDLERS=..., MAX_ATTEMPTS=...)``: XSM['OUTBOX'] for this test."""

    def apply(**changes: Any) -> None:
        xsm(OUTBOX={"HANDLERS": HANDLERS, "MAX_ATTEMPTS": 3, "BACKOFF_S": 0.0, **changes})

    return apply


@pytest.fixture(autouse=True)
def _outbox_machines(xsm: Any, outbox_settings: Callable[..., None]) -> Iterator[None]:
    """Applied before ``backend`` builds on top of it (autouse runs first)."""
    xsm(MACHINES={**BASE["MACHINES"], **MACHINES})
    outbox_settings()
    handlers.CALLS.clear()
    handlers.FAIL["flaky"] = 0
    yield
    handlers.CALLS.clear()


@dataclass
class Output:
    out: str
    err: str


def run(name: str, *args: Any) -> Output:
    """``call_command(name, *args)``; returns what it wrote."""
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *[str(a) for a in args], stdout=out, stderr=err)
    return Output(out.getvalue(), err.getvalue())


def outcomes(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The structured fields of every ``django_xsm.outbox`` log line."""
    return [r.xsm for r in caplog.records if r.name == "django_xsm.outbox" and hasattr(r, "xsm")]


@pytest.fixture
def outbox_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="django_xsm.outbox")
    return caplog
