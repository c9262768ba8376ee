"""Fixtures for the Redis tests: every test runs on fakeredis and, when
``XSM_REDIS_URL`` is set, on the live server (unique prefix per test, its
keys deleted afterwards)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import Backends, backend_factory

FLAVOURS = ["fakeredis", pytest.param("live", marks=pytest.mark.live)]


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(flavour: str) -> Any:
    """``make(**store_kwargs) -> Backends`` on this flavour."""
    yield from backend_factory(flavour)


@pytest.fixture
def b(make: Any) -> Backends:
    return make()
