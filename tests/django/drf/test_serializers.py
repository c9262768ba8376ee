"""``StatechartSerializerField``: the state column, the full value, and the
events the requesting user may send, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from django_xsm.contrib.drf import StatechartSerializerField
from django_xsm.registry import machines
from tests.django.drf import views
from tests.django.drf.conftest import DB_ALIASES
from tests.fieldapp.models import Order, Parcel, SlugOrder

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]

CART_EVENTS = [
    {"type": "ADD", "conditional": False},
    {"type": "PAY", "conditional": True},  # the guard needs the payload's amount
    {"type": "PAY_ANYWAY", "conditional": False},
]


def context_for(user: Any) -> dict[str, Any]:
    """A serializer context whose request was authenticated as ``user``."""
    request = Request(APIRequestFactory().get("/"))
    request.user = user
    return {"request": request}


def test_the_column_costs_no_redis_io(backend: Any, alias: str, round_trips: Any) -> None:
    row = Order.objects.using(alias).create(total=3)

    class ColumnOnly(serializers.ModelSerializer):
        status = StatechartSerializerField()

        class Meta:
            model = Order
            fields = ["id", "status"]

    with round_trips as rt:
        data = ColumnOnly(row).data
    assert data == {"id": row.pk, "status": "cart"} and rt.count == 0


def test_value_and_events_for_a_user(backend: Any, alias: str, alice: Any) -> None:
    row = Order.objects.using(alias).create(total=3)
    data = views.OrderSerializer(row, context=context_for(alice)).data
    assert data["status"] == "cart" and data["status_value"] == "cart"
    assert data["status_events"] == {"state": "cart", "events": CART_EVENTS}
    assert data["status_version"] == 0


def test_events_follow_the_users_permissions(
    backend: Any, alias: str, alice: Any, refunder: Any
) -> None:
    row = Order.objects.using(alias).create()
    row.status.send("PAY_ANYWAY")
    plain = views.OrderSerializer(row, context=context_for(alice)).data["status_events"]
    allowed = views.OrderSerializer(row, context=context_for(refunder)).data["status_events"]
    assert plain == {"state": "paid", "events": [{"type": "SHIP", "conditional": False}]}
    assert allowed["events"] == [
        {"type": "SHIP", "conditional": False},
        {"type": "REFUND", "conditional": False},
    ]


def test_without_a_request_only_unguarded_events_are_listed(backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    row.status.send("PAY_ANYWAY")
    events = views.OrderSerializer(row).data["status_events"]["events"]
    assert [e["type"] for e in events] == ["SHIP"]  # never REFUND: nobody is asking


def test_a_final_state_offers_no_events(backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    row.status.send("PAY_ANYWAY")
    row.status.send("SHIP")
    assert views.OrderSerializer(row).data["status_events"] == {"state": "shipped", "events": []}


def test_full_value_of_a_compound_and_a_parallel_state(backend: Any, alias: str) -> None:
    parcel = Parcel.objects.using(alias).create()
    parcel.state.send("PACKED")
    data = views.ParcelSerializer(parcel).data
    assert data["state"] == {"shipping": "picked"}
    assert data["state_events"]["state"] == {"shipping": "picked"}
    assert [e["type"] for e in data["state_events"]["events"]] == ["SPLIT", "LOADED"]
    parcel.state.send("SPLIT")
    assert views.ParcelSerializer(parcel).data["state"] == {
        "tracking": {"road": "moving", "customs": "pending"}
    }


def test_events_read_the_instance_so_a_lagging_row_agrees(backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create()
    stale = Order.objects.using(alias).get(pk=row.pk)
    machines["shop"].objects.send(f"shop:{row.pk}", "PAY_ANYWAY", create=True)
    # the stale copy still holds "cart"; the field loads and repairs it
    assert stale.status == "cart"
    data = views.OrderSerializer(stale).data
    assert data["status_events"]["state"] == "paid"
    assert [e["type"] for e in data["status_events"]["events"]] == ["SHIP"]


def test_a_model_serializer_maps_the_field_to_a_read_only_string(backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create(total=5)
    serializer = views.PlainOrderSerializer(row)
    assert serializer.data["status"] == "cart" and serializer.data["status_version"] == 0
    assert serializer.fields["status"].read_only
    incoming = views.PlainOrderSerializer(row, data={"total": 6, "status": "shipped"})
    assert incoming.is_valid() and "status" not in incoming.validated_data


def test_the_field_is_read_only_and_needs_a_statechart_source(backend: Any, alias: str) -> None:
    row = Order.objects.using(alias).create(total=5)

    class Wrong(serializers.ModelSerializer):
        total = StatechartSerializerField()

        class Meta:
            model = Order
            fields = ["total"]

    assert Wrong().fields["total"].read_only
    with pytest.raises(TypeError, match="needs a StatechartField as its source"):
        _ = Wrong(row).data


def test_the_viewset_serializes_rows_with_the_field(
    api: Any, backend: Any, alias: str, refunder: Any
) -> None:
    row = Order.objects.using(alias).create()
    row.status.send("PAY_ANYWAY")
    api.force_authenticate(refunder)
    data = api.get(f"/api/orders/{row.pk}/").json()
    assert data["status"] == "paid"
    assert [e["type"] for e in data["status_events"]["events"]] == ["SHIP", "REFUND"]
    listed = api.get("/api/orders/").json()
    assert [r["status"] for r in listed] == ["paid"]


def test_a_store_outage_while_serializing_answers_from_the_row(
    api: Any, alias: str, xsm: Any
) -> None:
    row = Order.objects.using(alias).create()
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    response = api.get(f"/api/orders/{row.pk}/")  # status_events cannot load the instance
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["status"], data["status_value"]) == ("cart", "cart")  # the row's column
    assert data["status_events"] == {"state": "cart", "events": None}  # unknown, said so


# --- rows whose instance key cannot be used (issue 21) ----------------------------------

UNUSABLE = {
    "newline": "bad\nkey",
    "control": "bad\x07key",
    "empty": "",
    "over 512": "x" * 600,
}


@pytest.mark.parametrize("slug", list(UNUSABLE.values()), ids=list(UNUSABLE))
def test_a_row_without_a_usable_key_is_shown_from_its_column(
    backend: Any, alias: str, alice: Any, caplog: Any, round_trips: Any, slug: str
) -> None:
    """It has no instance and never will: the column stands for the value,
    no event is offered (the events endpoint refuses it, 400 invalid-key),
    and a WARNING names the row; never an exception."""
    row = SlugOrder(slug=slug)  # as the database returns it (no 600-char slug fits PostgreSQL)
    row._state.adding, row._state.db = False, alias
    with round_trips as rt:
        data = views.SlugOrderSerializer(row, context=context_for(alice)).data
    assert data == {
        "slug": slug,
        "status": "cart",  # the column: the machine's initial state
        "status_value": "cart",
        "status_events": {"state": "cart", "events": []},
    }
    assert rt.count == 0
    warnings = [r for r in caplog.records if r.name == "django_xsm.drf"]
    assert warnings and all(r.levelname == "WARNING" for r in warnings)
    assert "fieldapp.SlugOrder" in warnings[0].getMessage()
    assert "no usable statechart key" in warnings[0].getMessage()


def test_one_row_without_a_usable_key_does_not_break_the_list(
    api: Any, backend: Any, alias: str, alice: Any
) -> None:
    SlugOrder.objects.using(alias).create(slug="bad\nkey")
    fine = SlugOrder.objects.using(alias).create(slug="fine")
    fine.status.send("PAY_ANYWAY")
    api.force_authenticate(alice)
    response = api.get("/api/slug-orders/")
    assert response.status_code == 200, response.content[:300]
    by_slug = {item["slug"]: item for item in response.json()}
    assert by_slug["bad\nkey"]["status_events"] == {"state": "cart", "events": []}
    assert by_slug["bad\nkey"]["status_value"] == "cart"
    assert by_slug["fine"]["status_value"] == "paid"
    assert by_slug["fine"]["status_events"]["events"] == [{"type": "SHIP", "conditional": False}]
    events = api.post(
        "/api/slug-orders/bad%0Akey/events/", {"type": "ADD"}, format="json",
        HTTP_IDEMPOTENCY_KEY="k",
    )  # fmt: skip
    assert events.status_code == 400 and events.json()["type"].endswith("/invalid-key")
