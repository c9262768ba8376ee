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
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.management import call_command

from django_xsm.backend.build import get_outbox, get_store
from django_xsm.outbox import OutboxWorker, RetryPolicy, get_handlers
from tests.django.commands.conftest import Manage
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


HOUR_MS = 3_600_000


class Recorder(random.Random):
    """A random source that says which bounds it was asked for and answers
    ``share`` of the way between them (``Backoff`` draws whole milliseconds)."""

    def __init__(self, share: float) -> None:
        super().__init__(0)
        self.share = share
        self.asked: list[tuple[int, int]] = []

    def randint(self, a: int, b: int) -> int:
        self.asked.append((a, b))
        return a + int((b - a) * self.share)


def worker(
    rng: Any,
    *,
    attempts: int = 3,
    backoff_s: float = 2.0,
    cap_s: float = 3.0,
    behind_ms: int = HOUR_MS,
) -> tuple[OutboxWorker, int]:
    """A worker on the test's outbox whose clock stands ``behind_ms`` in the
    past (so its retries are due at once), and that clock's reading."""
    base = get_store().clock() - behind_ms
    found = OutboxWorker(
        get_outbox(),
        get_handlers(),
        consumer="w",
        policy=RetryPolicy.of(attempts, backoff_s, cap_s, rng),
        clock=lambda: base,
    )
    return found, base


# --- subprocesses ---------------------------------------------------------------------


class Worker(Manage):
    """A ``python -m django <command>`` subprocess on the outbox's live
    settings (tests/django/outbox/live_settings.py); stopped by its pid."""

    def __init__(self, prefix: str, *args: str, url: str, handler: str) -> None:
        super().__init__(
            prefix,
            *args,
            url=url,
            settings="tests.django.outbox.live_settings",
            env={"XSM_TEST_HANDLER": handler},
        )

    def finish(self, timeout: float = 60.0) -> tuple[int, str, str]:
        return super().finish(timeout)


@pytest.fixture
def spawn() -> Iterator[Callable[..., Worker]]:
    """``spawn(prefix, *args, url=..., handler=...)``; leftovers are killed by pid."""
    started: list[Worker] = []

    def start(
        prefix: str, *args: str, url: str, handler: str = "tests.django.outbox.handlers.noop"
    ) -> Worker:
        found = Worker(prefix, *args, url=url, handler=handler)
        started.append(found)
        return found

    yield start
    for found in started:
        if found.proc.poll() is None:
            found.proc.kill()
            found.proc.wait(timeout=5)


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "it") -> Any:
    """Poll ``condition`` until it is truthy (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)
