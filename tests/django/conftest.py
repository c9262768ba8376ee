"""Fixtures of the Django-layer tests.

``backend`` runs a test on the embedded fakeredis and, when
``XSM_REDIS_URL`` is set, again on the live server (a unique PREFIX per
test, its keys deleted afterwards; never FLUSHDB). ``xsm`` switches XSM
settings for one test. ``round_trips`` counts what reaches a Redis server.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_xsm import backend as stores
from django_xsm import conf
from tests.django import views
from tests.support import LIVE_URL, RoundTrips, count_round_trips, delete_namespace

FLAVOURS = ["fakeredis", pytest.param("live", marks=pytest.mark.live)]


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    """Every test starts with rebuilt settings, stores and registry."""
    conf.reset()
    views.CALLS.clear()
    views.RACES.clear()
    views.LOCKS_SEEN.clear()
    yield
    for event in views.RELEASE.values():
        event.set()  # never leave a gated request thread waiting
    conf.reset()


@pytest.fixture
def xsm(settings: Any) -> Callable[..., dict[str, Any]]:
    """``xsm(**changes)``: XSM = the test settings updated with ``changes``
    (IDEMPOTENCY, AUDIT and TIMERS merged key by key), applied through override (reset on
    teardown)."""

    def apply(**changes: Any) -> dict[str, Any]:
        value = copy.deepcopy(settings.XSM)
        for key, change in changes.items():
            if key in ("IDEMPOTENCY", "AUDIT", "TIMERS"):
                value[key] = {**value.get(key, {}), **change}
            else:
                value[key] = change
        settings.XSM = value
        return value

    return apply


@pytest.fixture(params=FLAVOURS)
def backend(request: pytest.FixtureRequest, xsm: Any) -> Iterator[stores.Backend]:
    """The process backend on fakeredis, then on the live server."""
    prefix = f"xsmtest-{uuid.uuid4().hex[:12]}"
    if request.param == "live":
        if not LIVE_URL:
            pytest.skip("XSM_REDIS_URL is not set")
        xsm(REDIS_URL=LIVE_URL, PREFIX=prefix, EMBEDDED=None)
    else:
        xsm(PREFIX=prefix)
    found = stores.get_backend()
    try:
        yield found
    finally:
        if request.param == "live":
            delete_namespace(found.client, prefix)
            found.client.close()


@pytest.fixture
def live_url() -> str:
    if not LIVE_URL:
        pytest.skip("XSM_REDIS_URL is not set")
    return LIVE_URL


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    """``with round_trips as rt: ...; rt.count`` (see ``count_round_trips``)."""
    return count_round_trips(monkeypatch)


def problem(response: Any) -> dict[str, Any]:
    """The RFC 9457 body of ``response`` (asserting its content type)."""
    assert response["Content-Type"] == "application/problem+json", response["Content-Type"]
    data: dict[str, Any] = response.json()
    assert data["status"] == response.status_code
    # the deployment's own page for the type (django_xsm.urls), or about:blank
    assert data["type"] == "about:blank" or data["type"].startswith(
        "http://testserver/_xsm/problems/"
    ), data["type"]
    return data


def key_header(key: str) -> dict[str, str]:
    """Test-client kwargs sending ``Idempotency-Key: key``."""
    return {"HTTP_IDEMPOTENCY_KEY": key}
