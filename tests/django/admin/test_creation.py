"""The admin's add form of a model with a ``StatechartField``: the new
row's instance exists once the form's transaction commits, so the send
preview shows the deadline the instance really has; with Redis down the
row is added all the same (a WARNING names it). SQLite and PostgreSQL,
real commits."""

from __future__ import annotations

import datetime as _dt
import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from django_xsm import backend as stores
from django_xsm.registry import machines
from tests.django.admin.conftest import post_with_csrf
from tests.django.fields.conftest import DB_ALIASES, alias, routed  # noqa: F401
from tests.fieldapp.models import Ticket

pytestmark = pytest.mark.django_db(databases=DB_ALIASES, transaction=True)

ADD = "/shop-admin/fieldapp/ticket/add/"
DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


@pytest.fixture
def root(routed: str) -> Client:  # noqa: F811
    user = User.objects.create_user("root", password="pw", is_staff=True, is_superuser=True)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_the_add_form_creates_the_instance_and_the_preview_shows_its_deadline(
    backend: Any, root: Client
) -> None:
    store = stores.get_store()
    real = store.clock
    store.clock = lambda: real() - 3_600_000  # the ticket was added an hour ago
    try:
        response = post_with_csrf(root, ADD, {"title": "printer on fire"})
    finally:
        store.clock = real
    assert response.status_code == 302, response.content.decode()[:2000]
    ticket = Ticket.objects.get()
    view = machines["desk"].objects.get(f"desk:{ticket.pk}")
    [deadline] = view.deadlines
    assert view.version == 1 and Ticket.objects.get().status_version == 1
    due = _dt.datetime.fromtimestamp(deadline.due_ms / 1000, tz=_dt.UTC)
    page = root.get(f"/shop-admin/fieldapp/ticket/{ticket.pk}/statechart/status/send/?event=NOTE")
    html = page.content.decode()
    assert page.status_code == 200
    # NOTE keeps the state: the deadline after it is the instance's own, an
    # hour old, not a fresh one from a pure start computed now
    assert f"(due {due:%Y-%m-%d %H:%M:%S} UTC)" in html, html


def test_the_add_form_with_redis_down_adds_the_row_and_warns(
    backend: Any, root: Client, xsm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    caplog.set_level(logging.WARNING, logger="django_xsm")
    response = post_with_csrf(root, ADD, {"title": "while Redis is down"})
    assert response.status_code == 302
    ticket = Ticket.objects.get()
    assert (ticket.title, ticket.status_version) == ("while Redis is down", 0)
    assert ticket.status == "open"
    warned = [r.getMessage() for r in caplog.records if r.name == "django_xsm.fields"]
    assert warned == [
        f"fieldapp.Ticket pk={ticket.pk!r}: its statechart was not created when the row was "
        "saved (StoreUnavailableError); 'manage.py xsm_sync_models' creates it"
    ]
    listed = root.get(response["Location"])  # the changelist shows the row's column
    assert listed.status_code == 200 and "open" in listed.content.decode()
