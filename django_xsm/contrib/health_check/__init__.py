"""The XSM store as a django-health-check check (extra ``health-check``).

::

    INSTALLED_APPS = [..., "health_check", "django_xsm.contrib.health_check"]

then list ``"django_xsm.contrib.health_check.XsmHealthCheck"`` on
django-health-check 4.x's ``HealthCheckView`` (3.x: the app registers it);
setup and messages: docs/observability.md (django-health-check). The check
asks what ``/_xsm/ready`` asks (:mod:`.status`); its messages never name a
host, port or password.
"""

from __future__ import annotations

import importlib

from django_xsm.contrib import missing_extra

try:
    importlib.import_module("health_check")  # what the extra installs (untyped)
except ImportError as exc:
    missing_extra(
        exc,
        "health_check",
        extra="health-check",
        module="health_check",
        distribution="django-health-check",
    )

from .checks import XsmHealthCheck

__all__ = ["XsmHealthCheck"]
