"""Settings of the scanner subprocesses: the test settings on the live
server (``XSM_REDIS_URL``) under the test's prefix (``XSM_TEST_PREFIX``)."""

from __future__ import annotations

import os

from tests.django.commands.machines import MACHINES
from tests.django.settings import *  # noqa: F403
from tests.django.settings import XSM as _BASE

XSM = {
    **_BASE,
    "REDIS_URL": os.environ.get("XSM_REDIS_URL") or None,
    "EMBEDDED": None if os.environ.get("XSM_REDIS_URL") else True,
    "PREFIX": os.environ.get("XSM_TEST_PREFIX", "xsmtest"),
    # the model-field test app's models name these (system checks)
    "MACHINES": {
        **MACHINES,
        "shop": _BASE["MACHINES"]["shop"],
        "parcel": _BASE["MACHINES"]["parcel"],
        "signup": _BASE["MACHINES"]["signup"],
        "desk": _BASE["MACHINES"]["desk"],
    },
    "TIMERS": {"MAX_ATTEMPTS": 2, "BACKOFF_S": 0.05},
}
