"""Steps the Django topology tests run the same way on a cluster and on a
Sentinel set (the fixtures decide which)."""

from __future__ import annotations

import io

from django.core.management import call_command
from django.test import Client, override_settings

from django_xsm.registry import machines
from tests.django.commands.conftest import arm


def scanner_fires_a_due_timer() -> None:
    arm("alarm:1")  # created with its 1 s timer already overdue
    out = io.StringIO()
    call_command("xsm_scan_timers", stdout=out)
    assert "fired=1" in out.getvalue() and "errors=0" in out.getvalue()
    view = machines["alarm"].objects.get("alarm:1")
    assert (view.value, view.context["rings"]) == ("rung", 1)


def admin_lists_the_instances(admin_client: Client) -> None:
    for n in range(3):
        machines["ticket"].objects.send(f"ticket:adm{n}", "BUMP", create=True)
    with override_settings(ROOT_URLCONF="tests.django.admin.urls"):
        response = admin_client.get("/admin/django_xsm/instance/m/ticket/")
    assert response.status_code == 200
    html = response.content.decode()
    assert all(f">ticket:adm{n}<" in html for n in range(3))
