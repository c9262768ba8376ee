"""Fixtures of the testing toolkit's own tests.

``project`` is the project's ``XSM`` the helper starts from: the test
settings' embedded fakeredis, and, with ``XSM_REDIS_URL``, the live server
(where the helper works under a prefix of its own and erases it). The
tests drive :class:`~django_xsm.testing.Xsm` directly: the ``xsm`` fixture
is the plugin's, which these tests do not need (the sample project of
``sample_project/`` uses it, in a subprocess).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_xsm.testing import Xsm
from tests.django.outbox import handlers as outbox_handlers
from tests.django.settings import XSM as BASE
from tests.support import LIVE_URL
from tests.testing import handlers
from tests.testing.machines import MACHINES

#: A user's project, run by tests/testing/test_sample_project.py; not ours to collect.
collect_ignore = ["sample_project"]

FLAVOURS = ["fakeredis", pytest.param("live", marks=pytest.mark.live)]

HANDLERS = {
    "order.paid": "tests.testing.handlers.ship_it",
    "order.*": "tests.django.outbox.handlers.catch_all",
    "mute.*": "tests.django.outbox.handlers.flaky",
}


@pytest.fixture(params=FLAVOURS)
def project(request: pytest.FixtureRequest, settings: Any) -> Callable[..., None]:
    """The project's settings before the helper starts; ``project(**XSM
    changes)`` changes them further."""
    xsm = {
        **BASE,
        "MACHINES": {**BASE["MACHINES"], **MACHINES},
        "OUTBOX": {"HANDLERS": HANDLERS, "MAX_ATTEMPTS": 3, "BACKOFF_S": 10.0},
        "TIMERS": {"MAX_ATTEMPTS": 3, "BACKOFF_S": 10.0},
    }
    if request.param == "live":
        if not LIVE_URL:
            pytest.skip("XSM_REDIS_URL is not set")
        xsm.update(REDIS_URL=LIVE_URL, EMBEDDED=None)
    settings.XSM = xsm

    def change(**changes: Any) -> None:
        settings.XSM = {**settings.XSM, **changes}

    return change


@pytest.fixture
def helper(project: Any) -> Iterator[Xsm]:
    outbox_handlers.CALLS.clear()
    outbox_handlers.FAIL["flaky"] = 0
    handlers.SHIPPED.clear()
    with Xsm() as found:
        yield found
    outbox_handlers.CALLS.clear()
