"""The Django app: registers the system checks and compiles the machines."""

from __future__ import annotations

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class XsmConfig(AppConfig):
    """``INSTALLED_APPS = [..., "django_xsm"]``."""

    name = "django_xsm"
    label = "django_xsm"
    verbose_name = "XSM"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the checks)
        from .registry import machines

        # Compile every machine once, at start-up. Problems are kept, not
        # raised: `manage.py check` reports them as xsm.E001 / xsm.E007 and
        # using a broken machine raises ImproperlyConfigured.
        try:
            machines.load()
        except ImproperlyConfigured:
            pass
