"""XsmHealthCheck: the XSM store on django-health-check's page.

One class for both APIs of django-health-check: 4.x calls ``run()`` (in a
thread: the store's health check is blocking I/O), 3.x calls
``check_status()`` on the plugins its ``plugin_dir`` holds (this app's
``AppConfig.ready()`` registers it there).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .status import STORE, store_status

__all__ = ["PLUGIN_DIRECTORY", "XsmHealthCheck", "raise_for_status"]

#: django-health-check 3.x: plugins are registered in ``plugin_dir``.
PLUGIN_DIRECTORY = importlib.util.find_spec("health_check.plugins") is not None

_exceptions: Any = importlib.import_module("health_check.exceptions")
if PLUGIN_DIRECTORY:
    _backends: Any = importlib.import_module("health_check.backends")
    # 3.24 renamed BaseHealthCheckBackend to HealthCheck
    _Base: Any = getattr(_backends, "HealthCheck", None) or _backends.BaseHealthCheckBackend
else:
    _Base = importlib.import_module("health_check.base").HealthCheck


def raise_for_status() -> None:
    """Raise the health-check exception that says what is wrong, if anything."""
    status = store_status()
    if status.ok:
        return
    if status.problem == STORE:
        raise _exceptions.ServiceUnavailable(status.message)
    raise _exceptions.ServiceReturnedUnexpectedResult(status.message)


class XsmHealthCheck(_Base):  # type: ignore[misc]
    """The XSM store: reachable, writable, its namespace readable, and every
    configured machine loaded (what ``/_xsm/ready`` checks)."""

    #: 3.x: a failure fails the page (503 / 500), not only this line
    critical_service = True

    def run(self) -> None:
        """django-health-check 4.x."""
        raise_for_status()

    def check_status(self, subset: str | None = None) -> None:
        """django-health-check 3.x."""
        raise_for_status()

    def __repr__(self) -> str:
        return "XsmHealthCheck"
