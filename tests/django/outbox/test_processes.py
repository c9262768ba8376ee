"""The workers as real processes and with Redis down: a clean CommandError
and exit status 1, the daemon waiting an outage out, two daemons on one
live Redis delivering each entry once and stopping cleanly on SIGTERM, two
``--once`` runs splitting the work."""

from __future__ import annotations

import re
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm import backend as stores
from django_xsm.backend.build import get_outbox
from django_xsm.registry import machines
from tests.django.outbox.conftest import run, wait_for
from tests.support import LIVE_URL, delete_namespace, live_only

pytestmark = pytest.mark.timeout(180)

DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once
MESSAGE = (
    "Redis is unavailable (ConnectionError); check that the server is up and that "
    "XSM['REDIS_URL'] (or CACHE_ALIAS) points at it"
)
TALLY = "tests.django.outbox.handlers.tally"
DELIVERED = re.compile(r"delivered=(\d+)")


@pytest.fixture
def down(xsm: Any) -> None:
    xsm(REDIS_URL=DOWN, EMBEDDED=None, PREFIX=f"xsmtest-{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize(
    "args",
    [
        ["xsm_run_outbox", "--once"],
        ["xsm_outbox"],
        ["xsm_outbox", "--json"],
        ["xsm_outbox", "--redrive", "x-0"],
        ["xsm_outbox", "--redrive", "x-0", "--dry-run"],
        ["xsm_outbox", "--redrive-all"],
        ["xsm_outbox", "--purge-dead", "--older-than", "30d", "--dry-run"],
    ],
)
def test_with_redis_down_every_command_fails_cleanly(down: None, args: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        run(*args)
    assert str(info.value) == MESSAGE
    assert info.value.returncode == 1


def test_the_daemon_waits_an_outage_out(down: None) -> None:
    result = run("xsm_run_outbox", "--interval", "20ms", "--max-seconds", "0.2")
    lines = result.err.strip().splitlines()
    assert lines and all(
        line == "Redis is unavailable (ConnectionError); retrying" for line in lines
    )
    found = re.search(
        r"^Stopped after (\d+) batch\(es\): taken=0 .* unavailable=(\d+)$", result.out, re.M
    )
    assert found and found.group(1) == found.group(2) == str(len(lines))


def test_exit_status_and_no_traceback_from_a_shell(spawn: Any) -> None:
    code, out, err = spawn("xsmtest", "xsm_run_outbox", "--once", url=DOWN).finish()
    assert code == 1
    assert err.strip().endswith(f"CommandError: {MESSAGE}")
    assert "Traceback" not in err and out == ""


@pytest.fixture
def live(xsm: Any) -> Iterator[str]:
    """This process on the live server under a fresh prefix (and its keys
    deleted afterwards, the tally included)."""
    if not LIVE_URL:
        pytest.skip("XSM_REDIS_URL is not set")
    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    xsm(REDIS_URL=LIVE_URL, PREFIX=prefix, EMBEDDED=None)
    client = stores.get_backend().client
    yield prefix
    delete_namespace(client, prefix)


def _emit(count: int, start: int = 0) -> None:
    objects = machines["shipment"].objects
    for n in range(start, start + count):
        objects.send(f"shipment:{n}", "PAY", create=True)


def _tally(prefix: str) -> dict[bytes, bytes]:
    client = stores.get_backend().client
    found: dict[bytes, bytes] = client.hgetall(f"{{{prefix}}}:tally")
    return found


@live_only
@pytest.mark.live
def test_two_daemons_deliver_each_entry_once_and_stop_on_sigterm(live: str, spawn: Any) -> None:
    workers = [
        spawn(
            live,
            "xsm_run_outbox",
            "--interval",
            "10ms",
            "--consumer",
            f"w{n}",
            url=LIVE_URL,
            handler=TALLY,
        )
        for n in range(2)
    ]
    for w in workers:
        wait_for(lambda w=w: w.has("Delivering as"), 60, "the workers to start")
    _emit(200)
    wait_for(lambda: len(_tally(live)) == 200, 60, "every entry to be delivered")
    for w in workers:
        w.proc.send_signal(signal.SIGTERM)
    delivered = 0
    for w in workers:
        code, out, err = w.finish()
        assert code == 0, (out, err)
        assert "Traceback" not in err
        stopped = [
            line for line in out.splitlines() if line.startswith("Stopped on SIGTERM after ")
        ]
        assert len(stopped) == 1, out
        delivered += int(DELIVERED.findall(stopped[0])[0])
    assert delivered == 200
    assert set(_tally(live).values()) == {b"1"}  # nothing delivered twice
    assert get_outbox().stats()["pending"] == 0


@live_only
@pytest.mark.live
def test_two_once_runs_split_the_work(live: str, spawn: Any) -> None:
    _emit(300)
    workers = [
        spawn(live, "xsm_run_outbox", "--once", "--batch", "25", url=LIVE_URL, handler=TALLY)
        for _ in range(2)
    ]
    results = [w.finish() for w in workers]
    assert [code for code, _, _ in results] == [0, 0], results
    counts = [int(DELIVERED.findall(out)[0]) for _, out, _ in results]
    assert sum(counts) == 300
    assert len(_tally(live)) == 300 and set(_tally(live).values()) == {b"1"}
