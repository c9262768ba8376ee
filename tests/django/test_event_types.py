"""Reserved (``xstate.*``, ``xsm.*``) and unknown event types through
``@stateful_view`` (a view that sends the request body, sync and async,
strict and not) and the manager: refused before any write, as 403
``reserved-event`` / 422 ``unknown-event`` problems over HTTP; on fakeredis
and on the live server.

The ticket chart declares ``xsm.outbox.failed`` (it bumps the count), so
an accepted forgery would show."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from django_xsm.decorators import ViewInstance
from django_xsm.exceptions import EventNotAcceptedError, ReservedEventError, UnknownEventError
from django_xsm.registry import machines
from tests.django.conftest import problem

pytestmark = pytest.mark.django_db(transaction=False)

#: the views that send the body: as a mapping (sync, async, not strict) and splatted
BODY_VIEWS = ["splat_mapping", "asplat_mapping", "lenient_mapping", "splat"]

FORGED = {
    "type": "xsm.outbox.failed",
    "event": {"type": "order.paid"},
    "error": "forged",
    "attempts": 1,
    "delivery_id": "d-1",
}


def post(client: Any, url: str, data: Any, key: str = "k1") -> Any:
    return client.post(
        url, json.dumps(data), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )


def stored(tid: str) -> tuple[int, int, list[str]]:
    """(count, version, log event types) of ticket:<tid>."""
    view = machines["ticket"].objects.get(f"ticket:{tid}")
    history = machines["ticket"].objects.history(f"ticket:{tid}")
    return view.context["count"], view.version, [r.event_type for r in history]


@pytest.mark.parametrize("view", BODY_VIEWS)
@pytest.mark.parametrize(
    "body",
    [FORGED, {"type": "xsm.anything"}, {"type": "xstate.after.60000.ticket.open"},
     {"type": "xstate.init"}],
)  # fmt: skip
def test_a_reserved_type_from_the_body_is_403_and_writes_nothing(
    client: Any, backend: Any, view: str, body: dict[str, Any]
) -> None:
    response = post(client, f"/t/r1/{view}", body)
    assert response.status_code == 403
    data = problem(response)
    assert data["type"] == "http://testserver/_xsm/problems/reserved-event"
    assert data["title"] == "Reserved event type"
    assert data["event"] == body["type"]
    assert data["namespace"] == body["type"].split(".")[0]
    assert data["detail"].endswith(
        "events are sent only by django-xsm itself (timers, the outbox worker)"
    )
    assert not machines["ticket"].objects.exists("ticket:r1")
    assert machines["ticket"].objects.history("ticket:r1") == []
    # the key was released: the same key with a good body runs
    assert post(client, f"/t/r1/{view}", {"type": "BUMP"}).status_code == 200
    assert stored("r1") == (1, 1, ["BUMP"])


@pytest.mark.parametrize("view", BODY_VIEWS)
def test_the_compensation_never_runs_on_an_existing_instance(
    client: Any, backend: Any, view: str
) -> None:
    assert post(client, f"/t/r2/{view}", {"type": "BUMP"}, key="a").status_code == 200
    response = post(client, f"/t/r2/{view}", FORGED, key="b")
    assert response.status_code == 403
    assert problem(response)["type"].endswith("/problems/reserved-event")
    assert stored("r2") == (1, 1, ["BUMP"])


@pytest.mark.parametrize("view", BODY_VIEWS)
def test_an_unknown_type_is_422_with_the_closest_types(
    client: Any, backend: Any, view: str
) -> None:
    response = post(client, f"/t/u1/{view}", {"type": "BUMPP", "n": 1})
    assert response.status_code == 422
    data = problem(response)
    assert data["type"] == "http://testserver/_xsm/problems/unknown-event"
    assert data["title"] == "Unknown event type"
    assert data["detail"] == (
        "Event 'BUMPP' is unknown to machine 'ticket': no state of its chart takes it; "
        "did you mean 'BUMP'?"
    )
    assert (data["event"], data["reason"], data["suggestions"]) == (
        "BUMPP", "unknown-event", ["BUMP"],
    )  # fmt: skip
    assert "state" not in data  # the state plays no part
    assert not machines["ticket"].objects.exists("ticket:u1")
    assert post(client, f"/t/u1/{view}", {"type": "BUMP"}).status_code == 200


@pytest.mark.parametrize(("view", "status"), [("splat_mapping", 409), ("lenient_mapping", 200)])
def test_a_known_type_the_state_does_not_take_keeps_its_answer(
    client: Any, backend: Any, view: str, status: int
) -> None:
    response = post(client, f"/t/n1/{view}", {"type": "REOPEN"})  # closed's, not open's
    assert response.status_code == status
    if status == 409:
        assert problem(response)["reason"] == "no-transition"


def test_a_view_has_no_send_reserved(client: Any, backend: Any) -> None:
    response = client.post("/t/p1/reserved_probe")
    assert response.status_code == 200
    assert "send_reserved() is not available in a @stateful_view" in response.json()["refused"]
    assert not machines["ticket"].objects.exists("ticket:p1")
    assert not hasattr(ViewInstance(object(), object()), "asend_reserved")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("event", "error"),
    [
        ("xsm.outbox.failed", ReservedEventError),
        ({"type": "xstate.after.60000.ticket.open"}, ReservedEventError),
        ("CLOZE", UnknownEventError),
    ],
)
def test_the_manager_refuses_before_any_io(
    backend: Any, round_trips: Any, event: Any, error: type[Exception]
) -> None:
    objects = machines["ticket"].objects
    with round_trips as rt:
        with pytest.raises(error) as caught:
            objects.send("ticket:m1", event, create=True, idempotency_key="k")
    assert rt.count == 0
    if error is UnknownEventError:
        assert isinstance(caught.value, EventNotAcceptedError)
        assert caught.value.suggestions == ("CLOSE",)
        assert "did you mean 'CLOSE'?" in str(caught.value)
    assert not objects.exists("ticket:m1")
    # a block opened through the manager refuses the same, and writes nothing
    with objects.open("ticket:m1") as block:
        with pytest.raises(error):
            block.send(event)
    assert not objects.exists("ticket:m1")


def test_the_manager_can_still_send_a_compensation_on_purpose(backend: Any) -> None:
    objects = machines["ticket"].objects
    objects.send("ticket:m2", "BUMP", create=True)
    with objects.open("ticket:m2", create=False, actor="xsm:outbox") as block:
        assert block.send_reserved(FORGED["type"], delivery_id="d-2").accepted
    view = objects.get("ticket:m2")
    assert (view.context["count"], view.version) == (2, 2)
    [*_, last] = objects.history("ticket:m2")
    assert (last.event_type, last.actor) == ("xsm.outbox.failed", "xsm:outbox")


async def test_the_async_block_refuses_too(backend: Any) -> None:
    objects = machines["ticket"].objects
    async with objects.aopen("ticket:m3") as block:
        with pytest.raises(ReservedEventError):
            await block.asend(FORGED)
        with pytest.raises(UnknownEventError):
            await block.asend("BUMPP", idempotency_key="k")
    assert not await objects.aexists("ticket:m3")


def test_a_typo_in_a_view_is_logged_like_a_refusal(client: Any, backend: Any, caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="django_xsm.transitions"):
        assert post(client, "/t/l1/splat_mapping", {"type": "BUMPP"}).status_code == 422
    [line] = [r for r in caplog.records if r.name == "django_xsm.transitions"]
    assert line.getMessage() == "ticket ticket:l1: BUMPP not accepted in open (v0): unknown-event"
    assert line.xsm["reason"] == "unknown-event"  # type: ignore[attr-defined]
    # a reserved type is refused before the engine: no transition line, and no ERROR
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert post(client, "/t/l1/splat_mapping", FORGED, key="k2").status_code == 403
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [r for r in caplog.records if r.name == "django_xsm.transitions"]
