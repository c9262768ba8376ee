"""The model field and ``@stateful_view(model=...)`` with reserved
(``xstate.*``, ``xsm.*``) and unknown event types: refused before any I/O,
never listed by ``events()``; on SQLite and PostgreSQL, fakeredis and live.

The shop chart handles the outbox's ``xsm.outbox.failed`` in ``cart``
(``COMPENSATIONS`` records every run): no API a client reaches may run it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from django_xsm.exceptions import EventNotAcceptedError, ReservedEventError, UnknownEventError
from django_xsm.registry import machines
from tests.django.conftest import key_header, problem
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp import machines as charts
from tests.fieldapp.models import Order

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.fields.urls"),
]

FORGED = {"type": "xsm.outbox.failed", "event": {"type": "order.paid"}, "delivery_id": "d-1"}
REFUSED = [
    (FORGED, ReservedEventError),
    ("xstate.after.1.shop.cart", ReservedEventError),
    ("PAYY", UnknownEventError),
]


@pytest.fixture(autouse=True)
def _no_compensations() -> None:
    charts.COMPENSATIONS.clear()


@pytest.mark.parametrize(("event", "error"), REFUSED)
def test_send_refuses_before_any_io(
    alias: str, backend: Any, round_trips: Any, event: Any, error: type[Exception]
) -> None:
    order = Order.objects.using(alias).create()
    with round_trips as rt:
        with pytest.raises(error):
            order.status.send(event, actor="alice", idempotency_key="k")
    assert rt.count == 0
    assert charts.COMPENSATIONS == []
    assert row_in_db(Order, order.pk, alias) == ("cart", 0)
    assert not machines["shop"].objects.exists(order.status.key)


@pytest.mark.parametrize(("event", "error"), REFUSED)
def test_asend_refuses_before_any_io(
    alias: str, backend: Any, round_trips: Any, event: Any, error: type[Exception]
) -> None:
    order = Order.objects.using(alias).create()

    async def scenario() -> None:
        with round_trips as rt:
            with pytest.raises(error):
                await order.status.asend(event)
        assert rt.count == 0

    async_to_sync(scenario)()
    assert charts.COMPENSATIONS == []
    assert row_in_db(Order, order.pk, alias) == ("cart", 0)


def test_a_typo_names_the_closest_types(alias: str, backend: Any) -> None:
    """django-fsm-2's TransitionNotAllowed, for a type the chart has not."""
    order = Order.objects.using(alias).create()
    with pytest.raises(EventNotAcceptedError) as caught:
        order.status.send("PAY_ANYWHERE")
    exc = caught.value
    assert isinstance(exc, UnknownEventError) and exc.reason == "unknown-event"
    assert exc.suggestions == ("PAY_ANYWAY",)
    assert str(exc) == (
        "Event 'PAY_ANYWHERE' is unknown to machine 'shop': no state of its chart takes it; "
        "did you mean 'PAY_ANYWAY'? (fix the event type, or add a transition for it to the "
        "chart)"
    )
    # a type the chart has but the state does not take is still ignored
    assert not order.status.send("SHIP").accepted


def test_events_never_list_a_reserved_type(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    assert order.status.events() == ["ADD", "PAY", "PAY_ANYWAY"]
    assert machines["shop"].machine.knows("xsm.outbox.failed")  # the chart has it


def test_a_test_sends_the_compensation_through_the_row_on_purpose(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    order.status.send("ADD")
    with order.status.open(actor="xsm:outbox") as block:
        receipt = block.send_reserved("xsm.outbox.failed", delivery_id="d-7")
    assert receipt.accepted and charts.COMPENSATIONS == ["d-7"]
    assert [r.event_type for r in order.status.history()] == ["ADD", "xsm.outbox.failed"]


@pytest.mark.parametrize("view", ["send_body", "asend_body"])
@pytest.mark.parametrize(
    ("body", "status", "slug"),
    [
        (FORGED, 403, "reserved-event"),
        ({"type": "xstate.init"}, 403, "reserved-event"),
        ({"type": "ADDD", "n": 2}, 422, "unknown-event"),
    ],
)
def test_a_model_bound_view_sending_the_body_refuses(
    client: Any, backend: Any, view: str, body: dict[str, Any], status: int, slug: str
) -> None:
    order = Order.objects.create()
    response = client.post(
        f"/orders/{order.pk}/{view}", json.dumps(body), content_type="application/json",
        **key_header("k1"),
    )  # fmt: skip
    assert response.status_code == status
    data = problem(response)
    assert data["type"] == f"http://testserver/_xsm/problems/{slug}"
    assert data["event"] == body["type"]
    if slug == "unknown-event":
        assert data["suggestions"] == ["ADD"]
        assert data["detail"].endswith("did you mean 'ADD'?")
    assert charts.COMPENSATIONS == []
    assert row_in_db(Order, order.pk, "default") == ("cart", 0)
    assert not machines["shop"].objects.exists(order.status.key)
    # the key was released: the same key with a good body runs
    ok = client.post(
        f"/orders/{order.pk}/{view}", json.dumps({"type": "ADD"}),
        content_type="application/json", **key_header("k1"),
    )  # fmt: skip
    assert ok.status_code == 200
    assert row_in_db(Order, order.pk, "default") == ("cart", 1)
