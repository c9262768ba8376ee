"""Redis down: one WARNING per outage naming the cause (never the address
or a password), not one per request; an INFO when it answers again, and
a new WARNING when it fails again. On a private redis-server that the test
stops and restarts, through sync and async views."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.redis.errors import outages
from tests.redis.servers import RedisServer, needs_redis_server, wait_until

pytestmark = [pytest.mark.fault, needs_redis_server]

PASSWORD = "s3cret-pw"


@pytest.fixture
def server(xsm: Any) -> Iterator[RedisServer]:
    found = RedisServer(extra=["--requirepass", PASSWORD]).start(wait=False)
    try:
        wait_until(found.client(password=PASSWORD).ping, timeout=10, what="the server")
        xsm(
            REDIS_URL=f"redis://:{PASSWORD}@127.0.0.1:{found.port}/0",
            EMBEDDED=None,
            PREFIX=f"xsmtest-{uuid.uuid4().hex[:12]}",
            SOCKET_TIMEOUT_S=0.5,
        )
        outages.answered()  # whatever an earlier test left: this test starts "up"
        yield found
    finally:
        found.cleanup()


def outage_lines(caplog: Any) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "django_xsm.redis"]


def restart(server: RedisServer) -> None:
    server.stop()
    server.start(wait=False)
    wait_until(server.client(password=PASSWORD).ping, timeout=10, what="the server")


@pytest.mark.parametrize("view", ["bump", "abump"])
def test_one_warning_per_outage_naming_the_cause(
    client: Any, server: RedisServer, caplog: Any, view: str
) -> None:
    caplog.set_level(logging.INFO, logger="django_xsm.redis")
    assert client.post(f"/t/o1/{view}", HTTP_IDEMPOTENCY_KEY="k0").status_code == 201
    assert outage_lines(caplog) == []

    server.stop()
    for i in range(3):  # three requests, one outage
        assert client.post(f"/t/o1/{view}", HTTP_IDEMPOTENCY_KEY=f"k{i + 1}").status_code == 503
    [warning] = outage_lines(caplog)
    assert warning.levelno == logging.WARNING
    text = warning.getMessage()
    assert "Redis is unavailable (ConnectionError)" in text and "once per outage" in text
    assert str(server.port) not in text and PASSWORD not in text and "127.0.0.1" not in text
    assert warning.exc_info is None  # no traceback

    restart(server)
    assert client.post(f"/t/o1/{view}", HTTP_IDEMPOTENCY_KEY="k9").status_code == 201
    recovered = outage_lines(caplog)[-1]
    assert recovered.levelno == logging.INFO
    assert "Redis answers again after" in recovered.getMessage()
    failed = re.search(r"\((\d+) failed call\(s\)\)", recovered.getMessage())
    assert failed is not None and int(failed.group(1)) >= 3  # a request makes one or more

    server.stop()  # the next outage is logged again, once
    for i in range(2):
        assert client.post(f"/t/o1/{view}", HTTP_IDEMPOTENCY_KEY=f"j{i}").status_code == 503
    warnings = [r for r in outage_lines(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 2
