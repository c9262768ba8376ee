"""Steps the Django topology tests run the same way on a cluster and on a
Sentinel set (the fixtures decide which)."""

from __future__ import annotations

import io

from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings

from django_xsm.registry import machines
from tests.django.commands.conftest import arm
from tests.stream.inprocess import transitions, watch


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


def streams_follow_commits_on_every_key() -> None:
    """The live stream, sync (WSGI) and async (ASGI), on keys spread over
    the topology's nodes: each reads its own key's log, resumes after a
    seq and receives a commit made while it is open."""
    objects = machines["ticket"].objects
    stream = {"PERMISSION": "tests.stream.permissions.anyone", "HEARTBEAT_S": 0.5}
    with override_settings(XSM={**settings.XSM, "STREAM": stream}):
        for handler in ("wsgi", "asgi"):
            for key in [f"ticket:live-{handler}-{n}" for n in range(6)]:
                objects.send(key, "BUMP", create=True)
                got = watch(
                    handler,
                    key,
                    headers={"Last-Event-ID": "0"},
                    until=transitions(2),
                    during=lambda key=key: objects.send(key, "BUMP"),
                )
                assert got.status == 200, got.body
                records = [m.json for m in got.transitions]
                assert [(r["key"], r["event_type"]) for r in records] == [(key, "BUMP")] * 2
                assert [r["seq"] for r in records] == [1, 2]
