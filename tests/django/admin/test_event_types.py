"""The admin with reserved (``xstate.*``, ``xsm.*``) and unknown event
types: the XSM browser's send page refuses them as form errors and never
suggests a reserved one; ``StatechartAdminMixin`` shows no button for them
and answers 404 to a crafted URL or POST. Both charts declare the outbox's
``xsm.outbox.failed``, so an accepted forgery would show."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, post_with_csrf, seed_ticket
from tests.django.admin.test_mixin import (  # noqa: F401 (fixtures)
    buttons,
    change_url,
    order_in,
    root,
    send_url,
    staff,
)
from tests.fieldapp import machines as charts
from tests.fieldapp.models import Order

KEY = "evt:1"
SEND = f"{ADMIN}m/ticket/send/?key={KEY}"


@pytest.fixture
def seeded(backend: Any) -> Any:
    seed_ticket(KEY)
    return backend


@pytest.fixture
def operator(client_for: Any) -> Any:
    return client_for("olga", "view_instance", "send_event", "fire_timers", "forget_instance")


@pytest.fixture(autouse=True)
def _no_compensations() -> None:
    charts.COMPENSATIONS.clear()


def stored() -> tuple[Any, int, int, int]:
    view = machines["ticket"].objects.get(KEY)
    history = machines["ticket"].objects.history(KEY)
    return view.value, view.context["count"], view.version, len(history)


# --- the XSM browser's send page ---------------------------------------------------------


def test_the_send_page_never_suggests_a_reserved_type(seeded: Any, operator: Any) -> None:
    html = operator.get(SEND).content.decode()
    assert '<option value="BUMP">' in html
    assert "xsm.outbox.failed" not in html and "xstate." not in html


@pytest.mark.parametrize("step", ["preview", "apply"])
@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            "xsm.outbox.failed",
            "Event &#x27;xsm.outbox.failed&#x27; is reserved: xsm.* events are sent only by "
            "django-xsm itself (timers, the outbox worker).",
        ),
        ("xsm", "is reserved: xsm.* events"),
        ("xstate.init", "To fire a due timer, use “Fire timers now”."),
        (
            "BUMPP",
            "Event &#x27;BUMPP&#x27; is unknown to machine &#x27;ticket&#x27;: no state of its "
            "chart takes it; did you mean &#x27;BUMP&#x27;?",
        ),
    ],
)
def test_a_reserved_or_unknown_type_is_a_form_error(
    seeded: Any, operator: Any, step: str, event: str, message: str
) -> None:
    before = stored()
    response = post_with_csrf(
        operator, SEND, {"event": event, "payload": '{"delivery_id": "d"}', "step": step,
                         "version": str(before[2])},
    )  # fmt: skip
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'id="xsm-apply"' not in response.content.decode()
    assert stored() == before


# --- StatechartAdminMixin ---------------------------------------------------------------


def test_no_button_for_a_reserved_type(backend: Any, root: Client) -> None:  # noqa: F811
    order = order_in("cart")
    assert machines["shop"].machine.knows("xsm.outbox.failed")  # cart takes it
    html = root.get(change_url(order)).content.decode()
    assert buttons(html) == ["ADD", "PAY", "PAY_ANYWAY"]
    assert 'data-event="xsm.outbox.failed"' not in html  # the diagram still draws it
    assert "statechart/status/send/?event=xsm.outbox.failed" not in html


@pytest.mark.parametrize("event", ["xsm.outbox.failed", "xstate.after.1.shop.cart", "PAYY"])
def test_a_crafted_send_url_or_post_is_404_and_sends_nothing(
    backend: Any,
    root: Client,  # noqa: F811
    event: str,
) -> None:
    order = order_in("cart")
    url = send_url(order, event)
    assert root.get(url).status_code == 404
    applied = post_with_csrf(
        root, url, {"step": "apply", "version": "0", "payload": '{"delivery_id": "d"}'}
    )
    assert applied.status_code == 404
    assert charts.COMPENSATIONS == []
    row = Order.objects.get(pk=order.pk)
    assert (row.status.column, row.status_version) == ("cart", 0)
    assert not machines["shop"].objects.exists(row.status.key)


def test_a_known_type_still_reaches_the_send_page(backend: Any, root: Client) -> None:  # noqa: F811
    order = order_in("cart")
    url = send_url(order, "SHIP")  # the chart's, not the cart's
    assert root.get(url).status_code == 200  # the send page, not 404
    preview = post_with_csrf(root, url, {"step": "preview", "payload": "{}"})
    assert preview.status_code == 200
    assert 'id="xsm-refused"' in preview.content.decode()  # refused by the state
