"""``@stateful_view(model=...)`` and new rows: a saved row's instance is
there for a ``create=False`` view; a sync view's attempt runs in a
transaction of the row's database, so a 503 (Redis down before the view
or lost inside it) leaves no row the view wrote, and a conflict re-run
writes its rows once. SQLite and PostgreSQL, real commits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from django_xsm.registry import machines
from tests.django.conftest import key_header, problem
from tests.django.fields import views
from tests.django.fields.conftest import DB_ALIASES
from tests.fieldapp.models import Ticket
from tests.redis.servers import RedisServer, needs_redis_server

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES, transaction=True),
    pytest.mark.urls("tests.django.fields.urls"),
]

DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


@pytest.fixture(autouse=True)
def _no_hook() -> Iterator[None]:
    views.HOOK.clear()
    yield
    views.HOOK.clear()


def test_a_saved_row_is_found_by_a_view_with_create_false(
    client: Any, backend: Any, routed: str
) -> None:
    ticket = Ticket.objects.create(title="saved")
    response = client.post(f"/tickets/{ticket.pk}/assign", **key_header("assign-1"))
    assert response.status_code == 200, response.content
    assert response.json() == {"ticket": str(ticket.pk), "state": "assigned"}
    assert Ticket.objects.get(pk=ticket.pk).status == "assigned"


def test_a_conflict_rerun_writes_the_views_rows_once(
    client: Any, backend: Any, routed: str
) -> None:
    parent = Ticket.objects.create(title="parent")
    raced: list[str] = []

    def another_writer(row: Ticket, child: Ticket) -> None:
        if not raced:  # commits between this attempt's open and its commit
            raced.append(str(child.pk))
            machines["desk"].objects.send(f"desk:{row.pk}", "NOTE", actor="other")

    views.HOOK["split"] = another_writer
    response = client.post(f"/tickets/{parent.pk}/split", **key_header("split-1"))
    assert response.status_code == 201, response.content
    created = response.json()["created"]
    assert raced and raced[0] != created  # the first attempt's row was rolled back
    assert sorted(str(pk) for pk in Ticket.objects.values_list("pk", flat=True)) == sorted(
        [str(parent.pk), created]
    )
    assert machines["desk"].objects.get(f"desk:{parent.pk}").context["notes"] == 2
    assert not machines["desk"].objects.exists(f"desk:{raced[0]}")
    assert machines["desk"].objects.get(f"desk:{created}").version == 1  # created on commit


def test_redis_down_before_the_view_is_a_503_and_writes_nothing(
    client: Any, backend: Any, routed: str, xsm: Any
) -> None:
    parent = Ticket.objects.create()
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = client.post(f"/tickets/{parent.pk}/split", **key_header("split-2"))
    assert response.status_code == 503
    assert problem(response)["type"].endswith("/unavailable")
    assert list(Ticket.objects.values_list("pk", flat=True)) == [parent.pk]


@needs_redis_server
@pytest.mark.fault
def test_redis_lost_inside_the_view_is_a_503_and_rolls_its_row_back(
    client: Any, routed: str, xsm: Any
) -> None:
    server = RedisServer().start()
    try:
        xsm(
            REDIS_URL=server.url,
            EMBEDDED=None,
            PREFIX=f"xsmtest-{uuid.uuid4().hex[:8]}",
            SOCKET_TIMEOUT_S=0.5,
        )
        parent = Ticket.objects.create(title="parent")
        assert machines["desk"].objects.exists(f"desk:{parent.pk}")
        children: list[Ticket] = []

        def redis_dies(row: Ticket, child: Ticket) -> None:
            children.append(child)
            server.stop()  # the block's commit cannot reach it

        views.HOOK["split"] = redis_dies
        response = client.post(f"/tickets/{parent.pk}/split", **key_header("split-3"))
        assert response.status_code == 503, response.content
        assert problem(response)["type"].endswith("/unavailable")
        assert children  # the view ran and wrote its row...
        assert list(Ticket.objects.values_list("pk", flat=True)) == [parent.pk]  # ...rolled back
    finally:
        server.stop()
        server.cleanup()
