"""The admin's permission-only model (no table: ``managed = False``)."""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: ClassVar[list[tuple[str, str]]] = []

    operations = [
        migrations.CreateModel(
            name="Instance",
            fields=[
                ("ref", models.CharField(max_length=600, primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "instance",
                "verbose_name_plural": "instances",
                "permissions": [
                    ("send_event", "Can send events to XSM instances"),
                    ("fire_timers", "Can fire XSM instance timers now"),
                    ("forget_instance", "Can forget (erase) XSM instances"),
                ],
                "managed": False,
                "default_permissions": ("view",),
            },
        ),
    ]
