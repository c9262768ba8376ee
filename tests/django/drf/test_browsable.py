"""The browsable API on the events endpoint: its form, a form post, a
problem page, and a replay rendered for the client that asks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import modify_settings

from django_xsm.registry import machines
from tests.django.drf.conftest import DB_ALIASES
from tests.fieldapp.models import Order

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]

HTML = "text/html"


@pytest.fixture(autouse=True)
def _rest_framework_installed() -> Iterator[None]:
    """The browsable API's templates and tags come with the rest_framework app."""
    with modify_settings(INSTALLED_APPS={"append": "rest_framework"}):
        yield


def test_the_endpoint_shows_a_form_for_the_event(api: Any, backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    page = api.get(f"/api/orders/{row.pk}/events/", HTTP_ACCEPT=HTML)
    assert page.status_code == 405  # POST only; the page offers the POST form
    assert page["Content-Type"].startswith(HTML)
    html = page.content.decode()
    assert 'name="type"' in html and "Send one event to this row" in html


def test_a_form_post_sends_the_event_and_renders_a_page(api: Any, backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    response = api.post(
        f"/api/orders/{row.pk}/events/", {"type": "ADD", "n": "2"},
        format="multipart", HTTP_ACCEPT=HTML, HTTP_IDEMPOTENCY_KEY="form-1",
    )  # fmt: skip
    assert response.status_code == 200 and response["Content-Type"].startswith(HTML)
    assert "&quot;state&quot;: &quot;cart&quot;" in response.content.decode()
    [record] = machines["shop"].objects.history(f"shop:{row.pk}")
    assert record.payload == {"n": "2"}  # a form field has one value
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 2}


def test_a_problem_is_a_page_for_a_browser(api: Any, backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    response = api.post(
        f"/api/orders/{row.pk}/events/", {"type": "SHIP"}, format="json", HTTP_ACCEPT=HTML,
        HTTP_IDEMPOTENCY_KEY="k",
    )  # fmt: skip
    assert response.status_code == 409 and response["Content-Type"].startswith(HTML)
    assert "event-not-accepted" in response.content.decode()


def test_a_replay_is_rendered_for_the_client_that_asks(api: Any, backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    url = f"/api/orders/{row.pk}/events/"
    first = api.post(url, {"type": "ADD"}, format="json", HTTP_IDEMPOTENCY_KEY="r")
    page = api.post(url, {"type": "ADD"}, format="json", HTTP_IDEMPOTENCY_KEY="r", HTTP_ACCEPT=HTML)
    assert page["Idempotent-Replayed"] == "true" and page["Content-Type"].startswith(HTML)
    assert first["Content-Type"] == "application/json"
    assert machines["shop"].objects.get(f"shop:{row.pk}").context == {"items": 1}


def test_the_csrf_token_of_a_form_is_not_payload(api: Any, backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    response = api.post(
        f"/api/orders/{row.pk}/events/", {"type": "ADD", "csrfmiddlewaretoken": "t"},
        format="multipart", HTTP_IDEMPOTENCY_KEY="c",
    )  # fmt: skip
    assert response.status_code == 200
    [record] = machines["shop"].objects.history(f"shop:{row.pk}")
    assert record.payload == {}
