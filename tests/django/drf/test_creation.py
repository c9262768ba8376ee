"""``POST /tickets/`` through docs/drf.md's serializer: the new row's
instance follows its commit (its timer armed); with Redis unreachable the
row is committed and the answer is a 201 from the row's own column, never
a 503 that claims nothing was written. A django-xsm error inside a write
action answers a problem and rolls an ATOMIC_REQUESTS transaction back.
SQLite and PostgreSQL, real commits."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import connections, transaction
from rest_framework import viewsets

from django_xsm.registry import machines
from tests.django.conftest import problem
from tests.django.drf import views
from tests.django.drf.conftest import DB_ALIASES
from tests.fieldapp.models import Parcel, Ticket

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES, transaction=True),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]

DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once

DESK_EVENTS = [{"type": "ASSIGN", "conditional": False}, {"type": "NOTE", "conditional": False}]


def test_post_creates_the_row_and_its_instance(api: Any, backend: Any, routed: str) -> None:
    response = api.post("/api/tickets/", {"title": "printer on fire"}, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["status"] == "open" and data["status_value"] == "open"
    assert data["status_events"] == {"state": "open", "events": DESK_EVENTS}
    view = machines["desk"].objects.get(f"desk:{data['id']}")
    assert view.version == 1 and view.deadlines  # its escalation timer is armed
    assert data["status_version"] == 1


def test_post_with_redis_down_is_a_201_from_the_row_and_the_row_stays(
    api: Any, backend: Any, routed: str, xsm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    caplog.set_level(logging.WARNING, logger="django_xsm")
    response = api.post("/api/tickets/", {"title": "while Redis is down"}, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["status"] == "open" and data["status_value"] == "open"
    assert data["status_events"] == {"state": "open", "events": None}  # unknown, said so
    assert data["status_version"] == 0
    [row] = Ticket.objects.all()
    assert str(row.pk) == data["id"]  # committed: a retry would make a duplicate
    warned = [r.getMessage() for r in caplog.records if r.name == "django_xsm.fields"]
    assert warned == [
        f"fieldapp.Ticket pk={row.pk!r}: its statechart was not created when the row was "
        "saved (StoreUnavailableError); 'manage.py xsm_sync_models' creates it"
    ]
    listed = api.get("/api/tickets/")  # reads answer from the rows too
    assert listed.status_code == 200
    assert [t["status_events"] for t in listed.json()] == [{"state": "open", "events": None}]


def test_a_compound_state_falls_back_to_the_value_its_column_stands_for(
    api: Any, backend: Any, alias: str, xsm: Any
) -> None:
    parcel = Parcel.objects.using(alias).create()
    parcel.state.send("PACKED")
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = api.get(f"/api/parcels/{parcel.pk}/")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "id": parcel.pk,
        "state": {"shipping": "picked"},
        "state_events": {"state": {"shipping": "picked"}, "events": None},
    }


class _SendingTicketViewSet(views.TicketViewSet):
    """Sends an event in perform_create, as docs/drf.md shows."""

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic(using=views.DATABASE["alias"]):
            ticket = serializer.save()
            ticket.status.send("ASSIGN")


class _PlainSendingTicketViewSet(views.TicketViewSet):
    """Sends in perform_create without a transaction of its own."""

    def perform_create(self, serializer: Any) -> None:
        serializer.save().status.send("ASSIGN")


@pytest.fixture
def post_to(routed: str) -> Any:
    from rest_framework.test import APIRequestFactory

    def post(viewset: type[viewsets.ModelViewSet[Any]]) -> Any:
        request = APIRequestFactory().post("/api/tickets/", {"title": "t"}, format="json")
        view = viewset.as_view({"post": "create"})
        response = view(request)
        response.render()
        return response

    return post


def test_a_send_in_perform_create_commits_with_the_row(backend: Any, post_to: Any) -> None:
    response = post_to(_SendingTicketViewSet)
    assert response.status_code == 201, response.content
    ticket = Ticket.objects.get()
    view = machines["desk"].objects.get(f"desk:{ticket.pk}")
    assert (view.value, view.version, view.context["opened"]) == ("assigned", 1, 1)


def test_a_failed_send_in_perform_create_is_a_503_and_no_row(
    backend: Any, post_to: Any, xsm: Any
) -> None:
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = post_to(_SendingTicketViewSet)
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert not Ticket.objects.exists()


def test_atomic_requests_roll_back_a_write_action_that_answers_a_problem(
    client: Any, backend: Any, routed: str, xsm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(connections[routed].settings_dict, "ATOMIC_REQUESTS", True)
    monkeypatch.setattr(
        views.TicketViewSet, "perform_create", _PlainSendingTicketViewSet.perform_create
    )
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = client.post("/api/tickets/", {"title": "t"}, content_type="application/json")
    assert response.status_code == 503
    assert problem(response)["type"].endswith("/unavailable")
    assert not Ticket.objects.exists()  # the request's transaction rolled back
