"""``@stateful_view(model=...)``: the view gets the row and its statechart
together, the row moves forward after the commit, a missing row is 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_xsm.decorators import stateful_view
from tests.django.conftest import key_header, problem
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order, Parcel, SlugOrder

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.django.fields.urls")]


def test_a_model_bound_view_sends_and_moves_the_row(client: Any, backend: Any) -> None:
    order = Order.objects.create(total=7)
    response = client.post(f"/orders/{order.pk}/pay", {"amount": "10"}, **key_header("p1"))
    assert response.status_code == 200
    assert response.json() == {"order": order.pk, "state": "paid", "total": 7}
    assert row_in_db(Order, order.pk, "default") == ("paid", 1)


def test_a_refused_event_is_409_and_moves_nothing(client: Any, backend: Any) -> None:
    order = Order.objects.create()
    response = client.post(
        f"/orders/{order.pk}/pay", {"amount": "1"}, **key_header("p2")
    )  # the guard says no
    assert response.status_code == 409
    assert row_in_db(Order, order.pk, "default") == ("cart", 0)


def test_a_missing_row_is_404(client: Any, backend: Any) -> None:
    response = client.post("/orders/424242/pay", {"amount": "10"}, **key_header("p3"))
    assert response.status_code == 404
    assert "No fieldapp.Order with pk='424242'" in problem(response)["detail"]
    assert list(backend.store.list_keys("")) == []


def test_an_async_model_bound_view(client: Any, backend: Any) -> None:
    order = Order.objects.create()
    response = client.post(f"/orders/{order.pk}/apay", **key_header("p4"))
    assert response.status_code == 200 and response.json()["state"] == "paid"
    assert row_in_db(Order, order.pk, "default") == ("paid", 1)


def test_lookup_url_kwarg_and_idempotency_keys(client: Any, backend: Any) -> None:
    SlugOrder.objects.create(slug="sale")
    first = client.post("/slug-orders/sale/add", **key_header("k1"))
    again = client.post("/slug-orders/sale/add", **key_header("k1"))
    assert (first.status_code, first.json()) == (201, {"items": 1})
    assert again.json() == {"items": 1} and again["Idempotent-Replayed"] == "true"
    assert client.post("/slug-orders/nope/add", **key_header("k2")).status_code == 404


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": Order, "key": "x:{pk}"}, "drop machine= and key="),
        ({"model": object}, "needs a model class"),
        ({"model": Order, "field": "nope"}, "has no StatechartField 'nope'"),
        ({"model": SlugOrder.__mro__[-1]}, "needs a model class"),
        ({}, "needs a machine and a key"),
    ],
)
def test_bad_bindings_fail_at_decoration(kwargs: Any, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        stateful_view(**kwargs)


def test_a_model_without_a_statechart_field_is_refused() -> None:
    from django.contrib.auth.models import Group

    with pytest.raises(ImproperlyConfigured, match="it has none"):
        stateful_view(model=Group)
    assert stateful_view(model=Parcel)  # exactly one field: found without field=
