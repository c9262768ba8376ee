"""The admin's "XSM" section: one unmanaged model that only carries permissions.

Instances live in Redis, never in a table (``managed = False``: no
migration creates or touches a table). The model exists so the admin index
lists an "XSM" section and so Django creates its permissions
(``view_instance``, ``send_event``, ``fire_timers``, ``forget_instance``,
``redrive_outbox``; what each allows: docs/admin.md). Every write
permission is checked on its own; each also needs ``view_instance``.
"""

from __future__ import annotations

from django.db import models

__all__ = ["PERM_FIRE", "PERM_FORGET", "PERM_REDRIVE", "PERM_SEND", "PERM_VIEW", "Instance"]

PERM_VIEW = "django_xsm.view_instance"
PERM_SEND = "django_xsm.send_event"
PERM_FIRE = "django_xsm.fire_timers"
PERM_FORGET = "django_xsm.forget_instance"
PERM_REDRIVE = "django_xsm.redrive_outbox"


class Instance(models.Model):
    """A statechart instance held in the XSM store (no table; never queried).

    ``pk`` is ``"<machine name>:<instance key>"``, the object id the admin's
    history (``LogEntry``) records actions under.
    """

    ref = models.CharField(max_length=600, primary_key=True)

    class Meta:
        managed = False
        default_permissions = ("view",)
        permissions = [
            ("send_event", "Can send events to XSM instances"),
            ("fire_timers", "Can fire XSM instance timers now"),
            ("forget_instance", "Can forget (erase) XSM instances"),
            ("redrive_outbox", "Can redrive XSM outbox dead letters"),
        ]
        verbose_name = "instance"
        verbose_name_plural = "instances"

    def __str__(self) -> str:
        return str(self.ref)
