"""With Redis unreachable every command fails cleanly: a CommandError naming
the cause, a non-zero exit, no traceback; the daemon waits it out."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm import operations
from django_xsm.management.commands import xsm_scan_timers
from tests.django.commands.conftest import run

DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once
MESSAGE = (
    "Redis is unavailable (ConnectionError); check that the server is up and that "
    "XSM['REDIS_URL'] (or CACHE_ALIAS) points at it"
)


@pytest.fixture
def down(xsm: Any) -> None:
    xsm(REDIS_URL=DOWN, EMBEDDED=None, PREFIX=f"xsmtest-{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize(
    "args",
    [
        ["xsm_scan_timers"],
        ["xsm_scan_timers", "--dry-run"],
        ["xsm_scan_timers", "--machine", "alarm"],
        ["xsm_purge_logs", "--older-than", "30d"],
        ["xsm_purge_logs", "--older-than", "30d", "--dry-run", "--machine", "ticket"],
        ["xsm_purge_inbox"],
        ["xsm_purge_inbox", "--dry-run"],
        ["xsm_inspect", "order:1"],
        ["xsm_forget", "order:1", "--yes"],
    ],
)
def test_every_command_fails_cleanly(down: None, args: list[str]):
    with pytest.raises(CommandError) as info:
        run(*args)
    assert str(info.value) == MESSAGE
    assert info.value.returncode == 1


def test_the_daemon_waits_it_out(down: None, monkeypatch: pytest.MonkeyPatch):
    real = operations.run_scanner

    def two_passes(**kwargs: Any) -> Any:
        on_pass, seen = kwargs["on_pass"], []

        def watch(result: Any, message: str | None) -> None:
            on_pass(result, message)
            seen.append(message)
            if len(seen) == 2:
                kwargs["stop"].set()

        return real(**{**kwargs, "on_pass": watch})

    monkeypatch.setattr(xsm_scan_timers.operations, "run_scanner", two_passes)
    result = run("xsm_scan_timers", "--loop", "--interval", "10ms")
    # one line per pass, and an outage is counted as unavailable, not as errors
    # (errors are fires that raised: what to alert on)
    assert result.err.count("Redis is unavailable (ConnectionError); retrying") == 2
    assert len(result.err.strip().splitlines()) == 2
    assert (
        "Stopped after 2 pass(es): scanned=0 fired=0 stale=0 locked=0 dead_lettered=0 errors=0 "
        "unavailable=2 " in (result.out)
    )


def test_exit_status_and_no_traceback_from_a_shell(manage: Any):
    code, out, err = manage("xsmtest", "xsm_inspect", "order:1", url=DOWN).finish()
    assert code == 1
    assert err.strip().endswith(f"CommandError: {MESSAGE}")
    assert "Traceback" not in err and out == ""
