"""``GET /api/orders/{pk}/history/``: the row's transition records, newest
first, in cursor pages, through DRF's APIClient, on SQLite and PostgreSQL,
on fakeredis and live; its problems and its schema."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from django_xsm.registry import machines
from tests.django.drf.conftest import DB_ALIASES
from tests.django.drf.test_events import order, problem
from tests.fieldapp.models import Order

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]


def history(api: Any, pk: Any, prefix: str = "orders", **query: Any) -> Any:
    return api.get(f"/api/{prefix}/{pk}/history/", query)


def with_adds(alias: str, count: int) -> Order:
    """An order whose log holds ``count`` ADD records (n = 1..count)."""
    row = order(alias)
    for n in range(1, count + 1):
        row.status.send({"type": "ADD", "n": n}, actor=f"a{n}")
    return row


def every_page(api: Any, pk: Any, prefix: str = "orders", **query: Any) -> list[list[int]]:
    """The seqs of each page, following ``next`` to the end."""
    pages: list[list[int]] = []
    response = history(api, pk, prefix, **query)
    while True:
        assert response.status_code == 200, response.content
        body = response.json()
        pages.append([r["seq"] for r in body["results"]])
        if body["next"] is None:
            return pages
        assert body["next"].startswith("http://testserver/api/")
        response = api.get(body["next"])


def test_the_records_are_newest_first_as_the_log_holds_them(
    api: Any, backend: Any, alias: str
) -> None:
    row = with_adds(alias, 3)
    row.status.send({"type": "PAY_ANYWAY", "card_password": "hunter2"}, reason="test")
    response = history(api, row.pk)
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    stored = machines["shop"].objects.history(f"shop:{row.pk}")
    assert body["results"] == [r.to_dict() for r in reversed(stored)]
    assert [r["seq"] for r in body["results"]] == [4, 3, 2, 1]
    assert [r["event_type"] for r in body["results"]] == ["PAY_ANYWAY", "ADD", "ADD", "ADD"]
    assert body["results"][0]["payload"] == {"card_password": "[redacted]"}
    assert "hunter2" not in response.content.decode()


def test_pages_follow_next_to_the_oldest_without_loss_or_repeat(
    api: Any, backend: Any, alias: str
) -> None:
    row = with_adds(alias, 7)
    assert every_page(api, row.pk, page_size=3) == [[7, 6, 5], [4, 3, 2], [1]]
    assert every_page(api, row.pk, page_size=7) == [[7, 6, 5, 4, 3, 2, 1]]
    assert every_page(api, row.pk, page_size=1) == [[n] for n in range(7, 0, -1)]


def test_commits_between_pages_are_not_repeated(api: Any, backend: Any, alias: str) -> None:
    row = with_adds(alias, 5)
    first = history(api, row.pk, page_size=2).json()
    row.status.send({"type": "ADD", "n": 6})
    row.status.send({"type": "ADD", "n": 7})
    second = api.get(first["next"]).json()
    assert [r["seq"] for r in first["results"]] == [5, 4]
    assert [r["seq"] for r in second["results"]] == [3, 2]
    assert parse_qs(urlsplit(second["next"]).query) == {"cursor": ["2"], "page_size": ["2"]}
    assert [r["seq"] for r in history(api, row.pk, page_size=2).json()["results"]] == [7, 6]


def test_the_pages_end_where_a_trimmed_log_ends(api: Any, backend: Any, alias: str) -> None:
    row = with_adds(alias, 6)
    client = backend.client
    [stream] = client.scan_iter(match=f"*:log:shop:{row.pk}")
    client.xdel(stream, "1-0", "2-0", "3-0")  # the old end, as MAXLEN and purges trim it
    assert every_page(api, row.pk, page_size=2) == [[6, 5], [4]]


def test_a_row_without_records_has_an_empty_page(api: Any, backend: Any, alias: str) -> None:
    row = order(alias)
    assert history(api, row.pk).json() == {"next": None, "results": []}


def test_the_page_size_is_bounded_by_the_viewset(
    api: Any, backend: Any, alias: str, django_user_model: Any
) -> None:
    row = with_adds(alias, 5)
    api.force_authenticate(django_user_model.objects.create_user("sam", is_staff=True))
    assert every_page(api, row.pk, "staff-orders") == [[5, 4], [3, 2], [1]]  # default 2
    assert every_page(api, row.pk, "staff-orders", page_size=100) == [[5, 4], [3, 2], [1]]


@pytest.mark.parametrize("size", ["0", "-1", "two", "1.5", "٣", "9" * 30])
def test_a_page_size_that_is_no_number_is_a_400(
    api: Any, backend: Any, alias: str, size: str
) -> None:
    row = with_adds(alias, 1)
    response = history(api, row.pk, page_size=size)
    assert response.status_code == 400
    assert "page_size" in problem(response)["detail"]


@pytest.mark.parametrize("cursor", ["abc", "0", "-3", "1.0", "٣", "9" * 20, str(2**63 + 1)])
def test_a_cursor_no_page_gave_is_a_400_problem(
    api: Any, backend: Any, alias: str, cursor: str
) -> None:
    row = with_adds(alias, 1)
    response = history(api, row.pk, cursor=cursor)
    assert response.status_code == 400
    body = problem(response, "invalid-cursor")
    assert "next link" in body["detail"]


@pytest.mark.parametrize("cursor", ["9", "10", "1000", str(10**12), str(2**63)])
def test_a_cursor_past_the_newest_record_is_a_400_problem(
    api: Any, backend: Any, alias: str, cursor: str
) -> None:
    """No next link gives one; following pages from it walked empty pages
    (10**12: without end)."""
    row = with_adds(alias, 7)
    response = history(api, row.pk, cursor=cursor, page_size=50)
    assert response.status_code == 400, response.content
    assert "next link" in problem(response, "invalid-cursor")["detail"]


def test_a_cursor_just_past_the_newest_record_is_the_first_page(
    api: Any, backend: Any, alias: str
) -> None:
    row = with_adds(alias, 7)
    body = history(api, row.pk, cursor="8", page_size=3).json()
    assert [r["seq"] for r in body["results"]] == [7, 6, 5]
    assert parse_qs(urlsplit(body["next"]).query)["cursor"] == ["5"]


def test_a_cursor_below_a_trimmed_log_is_an_empty_last_page(
    api: Any, backend: Any, alias: str
) -> None:
    row = with_adds(alias, 6)
    client = backend.client
    [stream] = client.scan_iter(match=f"*:log:shop:{row.pk}")
    client.xdel(stream, "1-0", "2-0", "3-0", "4-0")
    assert history(api, row.pk, cursor="3").json() == {"next": None, "results": []}
    client.xdel(stream, "5-0", "6-0")  # nothing left: no newest record to compare with
    assert history(api, row.pk, cursor="3").json() == {"next": None, "results": []}


@pytest.mark.parametrize(
    ("method", "path"), [("post", "history"), ("delete", "history"), ("get", "events")]
)
def test_a_method_the_route_does_not_take_is_a_405_problem(
    api: Any, backend: Any, alias: str, method: str, path: str
) -> None:
    row = with_adds(alias, 1)
    response = getattr(api, method)(f"/api/orders/{row.pk}/{path}/")
    assert response.status_code == 405
    body = problem(response)
    assert body["title"] == "Method Not Allowed" and method.upper() in body["detail"]
    assert response["Allow"]


def test_the_detail_views_permission_applies(
    api: Any, backend: Any, alias: str, django_user_model: Any
) -> None:
    row = with_adds(alias, 2)
    api.force_authenticate(django_user_model.objects.create_user("pat"))
    assert api.get(f"/api/staff-orders/{row.pk}/").status_code == 403
    refused = history(api, row.pk, "staff-orders")
    assert refused.status_code == 403
    problem(refused)
    missing = history(api, row.pk + 1000)
    assert missing.status_code == 404
    problem(missing, "not-found")


def test_without_the_transition_log_it_is_the_audit_disabled_problem(
    api: Any, backend: Any, alias: str, xsm: Any
) -> None:
    row = with_adds(alias, 1)
    xsm(AUDIT={"ENABLED": False})
    response = history(api, row.pk)
    assert response.status_code == 404
    assert "AUDIT" in problem(response, "audit-disabled")["detail"]


def test_an_unavailable_store_is_503(api: Any, xsm: Any, alias: str) -> None:
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    row = order(alias)
    response = history(api, row.pk)
    assert response.status_code == 503 and int(response["Retry-After"]) >= 1
    problem(response, "unavailable")
