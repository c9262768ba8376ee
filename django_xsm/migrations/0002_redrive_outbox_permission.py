"""The admin's permission to redrive outbox dead letters (no table)."""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("django_xsm", "0001_initial")]

    operations = [
        migrations.AlterModelOptions(
            name="instance",
            options={
                "verbose_name": "instance",
                "verbose_name_plural": "instances",
                "permissions": [
                    ("send_event", "Can send events to XSM instances"),
                    ("fire_timers", "Can fire XSM instance timers now"),
                    ("forget_instance", "Can forget (erase) XSM instances"),
                    ("redrive_outbox", "Can redrive XSM outbox dead letters"),
                ],
                "managed": False,
                "default_permissions": ("view",),
            },
        ),
    ]
