"""Settings of the outbox's worker subprocesses: the test settings on the
live server (``XSM_REDIS_URL``) under the test's prefix
(``XSM_TEST_PREFIX``), every event to ``XSM_TEST_HANDLER`` (default: the
no-op handler)."""

from __future__ import annotations

import os

from tests.django.outbox.machines import MACHINES as _OUTBOX_MACHINES
from tests.django.settings import *  # noqa: F403
from tests.django.settings import XSM as _BASE

XSM = {
    **_BASE,
    "REDIS_URL": os.environ.get("XSM_REDIS_URL") or None,
    "EMBEDDED": None if os.environ.get("XSM_REDIS_URL") else True,
    "PREFIX": os.environ.get("XSM_TEST_PREFIX", "xsmtest"),
    "MACHINES": {**_BASE["MACHINES"], **_OUTBOX_MACHINES},
    "OUTBOX": {
        "HANDLERS": {"*": os.environ.get("XSM_TEST_HANDLER", "tests.django.outbox.handlers.noop")}
    },
}
