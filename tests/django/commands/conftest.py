"""Fixtures of the management-command tests.

Every test runs on the embedded fakeredis and, with ``XSM_REDIS_URL``, on
the live server (the ``backend`` fixture of tests/django: a unique prefix
per test, its keys deleted afterwards). The timer machines ``alarm`` and
``faulty`` are registered next to the test project's.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from django_xsm import backend as stores
from django_xsm.persistence.records import ClaimRequest, InboxMark
from django_xsm.redis.calls import Call
from django_xsm.redis.core import Many
from django_xsm.registry import machines
from tests.django.commands.machines import MACHINES
from tests.support import LIVE_URL

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _command_machines(xsm: Any) -> None:
    """Applied before ``backend`` builds on top of it (autouse runs first)."""
    xsm(MACHINES=MACHINES, TIMERS={"MAX_ATTEMPTS": 2, "BACKOFF_S": 0.0})


@dataclass
class Output:
    out: str
    err: str


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(name: str, *args: Any, tty: bool = False, **options: Any) -> Output:
    """``call_command(name, *args)``; returns what it wrote."""
    out, err = (Tty() if tty else io.StringIO()), io.StringIO()
    call_command(name, *[str(a) for a in args], stdout=out, stderr=err, **options)
    return Output(out.getvalue(), err.getvalue())


def arm(key: str, machine: str = "alarm", *, overdue_ms: int = 5000, **payload: Any) -> None:
    """Create ``key`` with its ``after`` deadline ``overdue_ms`` in the past
    (the store's clock is wound back while the instance is created)."""
    store = stores.get_store()
    real = store.clock
    store.clock = lambda: real() - overdue_ms - 1000
    try:
        event = "SNOOZE" if machine == "alarm" else "POKE"
        with machines[machine].objects.open(key, actor="test") as block:
            block.send(event, **payload)
    finally:
        store.clock = real


def at_time(ms_ago: int) -> Any:
    """Context manager: the store's clock runs ``ms_ago`` behind."""
    store = stores.get_store()

    class _Shift:
        def __enter__(self) -> None:
            self.real = store.clock
            store.clock = lambda: self.real() - ms_ago

        def __exit__(self, *exc: object) -> None:
            store.clock = self.real

    return _Shift()


def fires(key: str) -> int:
    """How many timer fires the transition log of ``key`` holds."""
    return sum(1 for r in stores.get_log().read(key) if r.event_type.startswith("xstate.after."))


def mark_rows(rows: list[tuple[str, str, str, int]]) -> None:
    """Write finished idempotency rows ``(scope, instance key, idem key,
    ttl ms)`` in one pipeline (the inbox's own MARK script)."""
    inbox = stores.get_inbox()
    layout = inbox.driver.run(inbox.core.state.ensure())
    calls = []
    for scope, key, idem, ttl_ms in rows:
        claim = ClaimRequest(scope, key, idem, "fp", "owner", 60_000)
        mark = InboxMark(claim, {"status": 200}, ttl_ms)
        keys = [layout.inbox(scope, key), layout.inbox_expiry(layout.bucket(key))]
        field = layout.inbox_field(key, idem)
        calls.append(Call("MARK", keys, [field, "fp", "owner", '{"status":200}', mark.ttl_ms]))

    def op() -> Any:
        return (yield Many(tuple(calls)))

    inbox.driver.run(op())


def wait_for(condition: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``condition`` until it is truthy (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


# --- subprocesses ---------------------------------------------------------------------


class Manage:
    """A ``python -m django <command>`` subprocess with the live settings
    (``settings``, plus ``env``); its stdout and stderr lines are collected
    by threads."""

    def __init__(
        self,
        prefix: str,
        *args: str,
        url: str = "",
        settings: str = "tests.django.commands.live_settings",
        env: dict[str, str] | None = None,
    ) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": settings,
            "XSM_TEST_PREFIX": prefix,
            "XSM_REDIS_URL": url,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.errors), daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def has(self, fragment: str) -> bool:
        return any(fragment in line for line in list(self.lines))

    def finish(self, timeout: float = 20.0) -> tuple[int, str, str]:
        """Wait for the exit; ``(exit status, stdout, stderr)``."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for reader in self.readers:
            reader.join(timeout=5)
        return self.proc.returncode, "\n".join(self.lines), "\n".join(self.errors)


@pytest.fixture
def manage() -> Iterator[Callable[..., Manage]]:
    started: list[Manage] = []

    def start(prefix: str, *args: str, url: str = "") -> Manage:
        found = Manage(prefix, *args, url=url)
        started.append(found)
        return found

    yield start
    for found in started:
        if found.proc.poll() is None:
            found.proc.kill()
            found.proc.wait(timeout=5)


@pytest.fixture
def live_prefix(live_url: str) -> Iterator[str]:
    """A fresh prefix on the live server, applied to this process's settings."""
    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    yield prefix


LIVE = LIVE_URL


# --- what reaches the server ------------------------------------------------------------


@dataclass
class Traced:
    name: str
    args: list[str]
    reply: Any = None  # fakeredis only (MONITOR shows no replies)


class CommandTrace:
    """Every command the server runs for the namespace while ``active`` —
    scripts' own ``redis.call``s included: a spy on fakeredis' command
    dispatch, ``MONITOR`` on the live server."""

    def __init__(self) -> None:
        self.patch = pytest.MonkeyPatch()
        self.calls: list[Traced] = []
        self.tag = ""

    def __call__(self, prefix: str) -> CommandTrace:
        self.tag = "{" + prefix + ":"
        return self

    def __enter__(self) -> CommandTrace:
        self.calls = []
        backend = stores.get_backend()
        self.live = backend.source == "url"
        if self.live:
            self._start_monitor()
        else:
            self._spy()
        return self

    def _spy(self) -> None:
        from fakeredis._socket._base import BaseFakeSocket

        real = BaseFakeSocket._run_command
        trace = self

        def spy(sock: Any, func: Any, sig: Any, args: list[Any], from_script: bool) -> Any:
            reply = real(sock, func, sig, args, from_script)
            text = [a.decode("utf-8", "replace") if isinstance(a, bytes) else str(a) for a in args]
            name = str(sig.name).upper()
            if any(trace.tag in a for a in text) and not name.startswith("EVAL"):
                trace.calls.append(Traced(name, text, reply))
            return reply

        self.patch.setattr(BaseFakeSocket, "_run_command", spy)

    def _start_monitor(self) -> None:
        import redis

        self.sentinel = f"trace-end-{uuid.uuid4().hex}"
        self.client = redis.Redis.from_url(LIVE_URL)
        self.monitor = self.client.monitor()
        self.monitor.__enter__()
        self.reader = threading.Thread(target=self._read_monitor, daemon=True)
        self.reader.start()

    def _read_monitor(self) -> None:
        while True:
            entry = self.monitor.next_command()
            words = str(entry["command"]).split(" ")
            if self.sentinel in words:
                return
            # the scripts' own calls, and plain commands (not the EVALSHA itself)
            if any(self.tag in w for w in words) and not words[0].upper().startswith("EVAL"):
                self.calls.append(Traced(words[0].upper(), words[1:]))

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.client.echo(self.sentinel)
            self.reader.join(timeout=10)
            self.monitor.__exit__()
            self.client.close()
        else:
            self.patch.undo()

    def names(self) -> list[str]:
        return [c.name for c in self.calls]


@pytest.fixture
def trace() -> Iterator[CommandTrace]:
    found = CommandTrace()
    yield found
    found.patch.undo()
