"""The DRF events endpoint with reserved (``xstate.*``, ``xsm.*``) and
unknown event types: a problem before any Redis I/O, nothing written, the
key released; never an available event nor in the schema's enum. On SQLite
and PostgreSQL, fakeredis and live.

The shop chart handles the outbox's ``xsm.outbox.failed`` in ``cart``
(``COMPENSATIONS`` records every run)."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.engine import create_machine
from django_xsm.registry import machines
from tests.django.drf import views
from tests.django.drf.conftest import DB_ALIASES
from tests.django.drf.test_events import history, order, problem, send
from tests.django.fields.test_field import row_in_db
from tests.fieldapp import machines as charts
from tests.fieldapp.models import Order

pytestmark = [
    pytest.mark.django_db(databases=DB_ALIASES),
    pytest.mark.urls("tests.django.drf.urls"),
    pytest.mark.usefixtures("views_db"),
]

FORGED = {
    "type": "xsm.outbox.failed",
    "event": {"type": "order.paid"},
    "error": "forged",
    "attempts": 10,
    "delivery_id": "d-1",
}


@pytest.fixture(autouse=True)
def _no_compensations() -> None:
    charts.COMPENSATIONS.clear()


@pytest.mark.parametrize(
    "body", [FORGED, {"type": "xsm.outbox.failed"}, {"type": "xstate.init"},
             {"type": "xstate.after.1000.shop.cart"}],
)  # fmt: skip
def test_an_anonymous_client_cannot_send_a_reserved_type(
    api: Any, backend: Any, alias: str, round_trips: Any, body: dict[str, Any]
) -> None:
    row = order(alias)
    with round_trips as rt:
        response = send(api, row.pk, body, key="k")
    assert rt.count == 0  # refused before any Redis I/O
    assert response.status_code == 403
    data = problem(response, "reserved-event")
    assert (data["title"], data["event"]) == ("Reserved event type", body["type"])
    assert data["namespace"] == body["type"].split(".")[0]
    assert views.CALLS["perform_event"] == 0
    assert charts.COMPENSATIONS == []
    assert not machines["shop"].objects.exists(f"shop:{row.pk}")
    assert history(row) == []
    assert row_in_db(Order, row.pk, alias) == ("cart", 0)
    # nothing was claimed: the key is free for a real event
    assert send(api, row.pk, {"type": "ADD"}, key="k").status_code == 200


def test_a_reserved_type_is_refused_on_an_existing_instance_too(
    api: Any, backend: Any, alias: str, alice: Any
) -> None:
    row = order(alias)
    api.force_authenticate(alice)
    assert send(api, row.pk, {"type": "ADD"}, key="a").status_code == 200
    response = send(api, row.pk, FORGED, key="b")
    assert response.status_code == 403
    problem(response, "reserved-event")
    assert charts.COMPENSATIONS == []
    assert [r.event_type for r in history(row)] == ["ADD"]
    assert row_in_db(Order, row.pk, alias) == ("cart", 1)


def test_an_unknown_type_is_422_with_the_closest_types(
    api: Any, backend: Any, alias: str, round_trips: Any
) -> None:
    row = order(alias)
    with round_trips as rt:
        response = send(api, row.pk, {"type": "PAY_ANYWHY", "n": 1}, key="k")
    assert rt.count == 0
    assert response.status_code == 422
    data = problem(response, "unknown-event")
    assert data["detail"] == (
        "Event 'PAY_ANYWHY' is unknown to machine 'shop': no state of its chart takes it; "
        "did you mean 'PAY_ANYWAY'?"
    )
    assert (data["event"], data["reason"], data["suggestions"]) == (
        "PAY_ANYWHY", "unknown-event", ["PAY_ANYWAY"],
    )  # fmt: skip
    assert views.CALLS["perform_event"] == 0
    assert not machines["shop"].objects.exists(f"shop:{row.pk}")
    assert send(api, row.pk, {"type": "ADD"}, key="k").status_code == 200


def test_a_known_type_the_state_does_not_take_is_still_409(
    api: Any, backend: Any, alias: str
) -> None:
    row = order(alias)
    response = send(api, row.pk, {"type": "SHIP"})
    assert response.status_code == 409
    assert problem(response, "event-not-accepted")["reason"] == "no-transition"


def test_available_events_never_list_a_reserved_type(
    api: Any, backend: Any, alias: str, alice: Any
) -> None:
    row = order(alias)
    api.force_authenticate(alice)
    response = send(api, row.pk, {"type": "ADD"})
    assert [e["type"] for e in response.json()["events"]] == ["ADD", "PAY", "PAY_ANYWAY"]
    shown = views.OrderSerializer(row).data["status_events"]["events"]
    assert "xsm.outbox.failed" not in [e["type"] for e in shown]


def test_the_schema_enum_is_the_sendable_types_or_none_for_a_wildcard_chart(
    xsm: Any, settings: Any
) -> None:
    from django_xsm.contrib.drf.schema import _event_types

    class View:
        def __init__(self, name: str) -> None:
            self.name = name

        def get_statechart_field(self) -> Any:
            return type("Field", (), {"machine_name": self.name})()

    wild = {"id": "wild", "initial": "a", "states": {"a": {"on": {"GO": "a", "audit.*": "a"}}}}
    xsm(MACHINES={**settings.XSM["MACHINES"], "wild": create_machine(wild)})
    assert _event_types(View("shop")) == ["ADD", "PAY", "PAY_ANYWAY", "SHIP", "REFUND"]
    assert _event_types(View("wild")) is None  # "audit.*" takes types it does not name
