"""XsmHealthCheck with django-health-check installed: healthy on the store,
ServiceUnavailable when Redis is down, ServiceReturnedUnexpectedResult for
a broken deployment, through the package's own view and its check runner;
messages never name a host, port or password. Runs with whichever major
version is installed (3.x: plugin_dir and health_check.urls; 4.x:
HealthCheckView and its check list)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from django.core.management import call_command

from django_xsm import backend as stores
from django_xsm.contrib.health_check import XsmHealthCheck
from django_xsm.contrib.health_check.checks import PLUGIN_DIRECTORY
from django_xsm.contrib.health_check.status import CONFIGURATION, STORE, store_status

v3_only = pytest.mark.skipif(not PLUGIN_DIRECTORY, reason="django-health-check 3.x API")
v4_only = pytest.mark.skipif(PLUGIN_DIRECTORY, reason="django-health-check 4.x API")


def run_check() -> str | None:
    """Run the check the way the installed django-health-check does:
    ``"<exception class>: <message>"``, or None when healthy."""
    check = XsmHealthCheck()
    if PLUGIN_DIRECTORY:
        check.run_check()
        errors = list(check.errors)
    else:
        result = asyncio.run(check.get_result())
        errors = [] if result.error is None else [result.error]
    return "\n".join(f"{type(e).__name__}: {e.message}" for e in errors) or None


def page(client: Any, accept: str = "application/json") -> tuple[int, str]:
    response = client.get("/ht/", HTTP_ACCEPT=accept)
    return response.status_code, response.content.decode()


def test_healthy_on_the_configured_store(client: Any, backend: stores.Backend) -> None:
    assert run_check() is None
    status = store_status()
    assert status.ok and status.latency_ms is not None and status.problem == ""
    assert status.message.startswith(backend.description)
    code, body = page(client)
    assert code == 200
    assert json.loads(body) in (
        {"XsmHealthCheck": "OK"},
        {"XsmHealthCheck": "working"},
    )  # 3.x < 3.24
    code, html = page(client, "text/html")
    assert code == 200 and "XsmHealthCheck" in html


def test_redis_down_is_service_unavailable_and_leaks_nothing(client: Any, redis_down: str) -> None:
    error = run_check()
    assert error == "ServiceUnavailable: XSM store unavailable (ConnectionError)"
    assert store_status().problem == STORE
    secrets = re.compile(redis_down)
    formats = ("application/json", "text/html") + (() if PLUGIN_DIRECTORY else ("text/plain",))
    for accept in formats:
        code, body = page(client, accept)
        assert code == 500, accept
        assert "XSM store unavailable" in body
        assert not secrets.search(body), (accept, body)


def test_it_agrees_with_the_readiness_endpoint(
    client: Any, backend: stores.Backend, xsm: Any, closed_port: int
) -> None:
    assert client.get("/_xsm/ready").status_code == 200 and store_status().ok
    xsm(REDIS_URL=f"redis://127.0.0.1:{closed_port}/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    ready = client.get("/_xsm/ready")
    assert ready.status_code == 503 and ready.json()["reason"] == "store"
    assert store_status().problem == STORE


def test_a_machine_that_fails_to_load_is_an_unexpected_result(
    backend: stores.Backend, xsm: Any
) -> None:
    xsm(MACHINES={"ticket": "tests.django.machines.ticket", "broken": "tests.nowhere.machine"})
    assert run_check() == (
        "ServiceReturnedUnexpectedResult: XSM machines failed to load: broken (run manage.py check)"
    )
    assert store_status().problem == CONFIGURATION


def test_settings_without_a_store_are_an_unexpected_result(xsm: Any) -> None:
    xsm(EMBEDDED=False)
    assert run_check() == (
        "ServiceReturnedUnexpectedResult: XSM settings name no usable store (run manage.py check)"
    )


def test_refused_credentials_are_a_configuration_problem(
    backend: stores.Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = {"ok": False, "error": "WRONGPASS", "credentials_refused": True}
    monkeypatch.setattr(type(backend.store), "health", lambda self: refused)
    assert run_check() == (
        "ServiceReturnedUnexpectedResult: XSM store refused the credentials (WRONGPASS)"
    )
    hostile = {"ok": False, "error": "host 10.0.0.5:6379 said <no>"}
    monkeypatch.setattr(type(backend.store), "health", lambda self: hostile)
    assert run_check() == "ServiceUnavailable: XSM store unavailable (unknown)"


def test_a_reset_namespace_is_still_healthy(
    backend: stores.Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reset = {"ok": True, "latency_ms": 0.3, "namespace_reset": True}
    monkeypatch.setattr(type(backend.store), "health", lambda self: reset)
    assert run_check() is None
    assert store_status().namespace_reset
    assert "lost this namespace's data" in caplog.text


@v3_only
def test_the_app_registers_the_check_once() -> None:
    from health_check.plugins import plugin_dir

    from django_xsm.contrib.health_check.apps import XsmHealthCheckConfig

    entries = [p for p, _ in plugin_dir._registry if p is XsmHealthCheck]
    assert entries == [XsmHealthCheck]
    XsmHealthCheckConfig.ready(None)  # type: ignore[arg-type]
    assert [p for p, _ in plugin_dir._registry if p is XsmHealthCheck] == [XsmHealthCheck]


@v4_only
def test_the_management_command_runs_the_check(
    backend: stores.Backend, xsm: Any, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as healthy:
        call_command("health_check", "ht", "--no-http")
    assert healthy.value.code == 0
    assert "XsmHealthCheck: OK" in capsys.readouterr().out
    xsm(REDIS_URL=f"redis://127.0.0.1:{closed_port}/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    with pytest.raises(SystemExit) as down:
        call_command("health_check", "ht", "--no-http")
    assert down.value.code == 1
    assert "XsmHealthCheck: Unavailable: XSM store unavailable" in capsys.readouterr().out
