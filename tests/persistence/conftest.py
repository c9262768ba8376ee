"""Fixtures of the persistence runtime tests: one backend set per flavour.

``make`` builds backends of the parametrised flavour (``memory``: the
in-process MemoryStore (marker ``memory``), ``fakeredis``, ``live``; live skips without
``XSM_REDIS_URL`` and deletes its own namespace); ``b`` is one set of them. The contract classes in
``contract.py`` define their own ``make`` and are not affected.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import BackendFactory, Backends, FakeClock, backend_factory

# ``memory`` is RedisStore on an in-process fakeredis, the ``fakeredis`` flavour's
# client: the legs of scripts/ci_matrix that vary Python or redis-py leave it out.
MEMORY = pytest.param("memory", marks=pytest.mark.memory)
ALL = [MEMORY, "fakeredis", pytest.param("live", marks=pytest.mark.live)]
LOCAL = [MEMORY, "fakeredis"]


@pytest.fixture(params=ALL)
def make(request: pytest.FixtureRequest) -> Iterator[BackendFactory]:
    yield from backend_factory(request.param)


@pytest.fixture(params=LOCAL)
def make_local(request: pytest.FixtureRequest) -> Iterator[BackendFactory]:
    """Memory and fakeredis only: for tests that are slow on a real server."""
    yield from backend_factory(request.param)


@pytest.fixture
def b(make: BackendFactory) -> Backends:
    return make()


@pytest.fixture
def bl(make_local: BackendFactory) -> Backends:
    return make_local()


def block_clock(backends: Backends) -> FakeClock:
    """The clock blocks on ``backends.store`` arm deadlines and stamp logs
    with, as a FakeClock (installed on the store)."""
    clock: Any = backends.extra.get("clock")
    if clock is None:
        clock = FakeClock()
        backends.store.clock = clock
        backends.extra["clock"] = clock
    assert isinstance(clock, FakeClock)
    return clock
