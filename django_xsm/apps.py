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
        from . import backend, checks  # noqa: F401  (checks: registers the checks)
        from .registry import machines

        # The backend runs and names the registered machines (timer
        # scanner, transition signals and log lines): handed down here,
        # it never imports the registry.
        backend.use_machines(machines)

        # Compile every machine once, at start-up. Problems are kept, not
        # raised: `manage.py check` reports them as xsm.E001 / xsm.E007 and
        # using a broken machine raises ImproperlyConfigured.
        try:
            machines.load()
        except ImproperlyConfigured:
            pass
