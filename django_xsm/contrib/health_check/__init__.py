"""The XSM store as a django-health-check check (extra ``health-check``).

::

    INSTALLED_APPS = [..., "health_check", "django_xsm.contrib.health_check"]

    # django-health-check 4.x: list the check on the view
    from health_check.views import HealthCheckView
    urlpatterns = [
        path("ht/", HealthCheckView.as_view(checks=[
            "health_check.checks.Database",
            "django_xsm.contrib.health_check.XsmHealthCheck",
        ])),
    ]
    # django-health-check 3.x: the app registers it; path("ht/", include("health_check.urls"))

The check asks what ``/_xsm/ready`` asks (:mod:`.status`) and reports OK,
``ServiceUnavailable`` or ``ServiceReturnedUnexpectedResult``; its messages
never name a host, port or password.
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
