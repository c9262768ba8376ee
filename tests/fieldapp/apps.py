from __future__ import annotations

from django.apps import AppConfig


class FieldAppConfig(AppConfig):
    name = "tests.fieldapp"
    label = "fieldapp"
    default_auto_field = "django.db.models.BigAutoField"
