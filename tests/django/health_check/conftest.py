"""Fixtures of the django-health-check tests: the package and this app
installed, its page mounted at ``/ht/``, and a Redis that is down."""

from __future__ import annotations

import socket
from typing import Any

import pytest

pytest.importorskip("health_check")


@pytest.fixture(autouse=True)
def _installed(settings: Any) -> None:
    # override_settings(INSTALLED_APPS=...) repopulates the app registry,
    # so this app's ready() runs as in a project
    settings.INSTALLED_APPS = [
        *settings.INSTALLED_APPS,
        "health_check",
        "django_xsm.contrib.health_check",
    ]
    settings.ROOT_URLCONF = "tests.django.health_check.urls"


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def redis_down(xsm: Any, closed_port: int) -> str:
    """XSM pointed at a closed port, with a password in the URL; returns
    what must never appear in a message."""
    xsm(
        REDIS_URL=f"redis://:s3cr3t-pw@127.0.0.1:{closed_port}/0",
        EMBEDDED=None,
        SOCKET_TIMEOUT_S=0.5,
    )
    return f"s3cr3t-pw|127.0.0.1|{closed_port}|redis://"
