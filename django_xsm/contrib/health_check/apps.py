"""The app that puts the XSM store on django-health-check's page."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig


class XsmHealthCheckConfig(AppConfig):
    """``"django_xsm.contrib.health_check"`` in ``INSTALLED_APPS``; with
    django-health-check 3.x, ``ready()`` registers
    :class:`~.checks.XsmHealthCheck` in ``plugin_dir`` (4.x has no registry)."""

    name = "django_xsm.contrib.health_check"
    label = "xsm_health_check"
    verbose_name = "django-xsm health check"

    def ready(self) -> None:
        from .checks import PLUGIN_DIRECTORY, XsmHealthCheck

        if PLUGIN_DIRECTORY:
            import importlib

            directory: Any = importlib.import_module("health_check.plugins").plugin_dir
            # ready() runs again whenever INSTALLED_APPS change (tests): once is enough
            if not any(entry[0] is XsmHealthCheck for entry in directory._registry):
                directory.register(XsmHealthCheck)
