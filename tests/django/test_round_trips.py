"""docs/redis.md#round-trips: one decorated request with an Idempotency-Key,
audit on, either lock, costs 2 Redis round trips (open; commit). Measured
by counting what redis-py sends (one packet per command or pipeline), on
fakeredis and on the live server."""

from __future__ import annotations

from typing import Any

from django_xsm.registry import machines
from tests.django.conftest import RoundTrips


def _warm(client: Any, url: str) -> None:
    # First use of a client connects, loads the scripts and reads the
    # namespace's schema marker: one-off costs, not per request.
    response = client.post(url, HTTP_IDEMPOTENCY_KEY="warm-up")
    assert response.status_code in (200, 201), response.content


def test_optimistic_keyed_request_is_two_round_trips(
    client: Any, backend: Any, round_trips: RoundTrips
):
    assert any(type(p).__name__ == "AuditPlugin" for p in backend.plugins)
    _warm(client, "/t/warm/bump")
    with round_trips as rt:
        response = client.post("/t/rt1/bump", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 201
    assert rt.count == 2
    assert machines["ticket"].objects.history("ticket:rt1")[0].idempotency_key == "k1"


# Async views are measured under ASGI (one loop per process). Under WSGI
# Django gives every async view a loop of its own, so its client connects
# and reads the schema marker on every request (docs/django.md).
async def test_async_keyed_request_is_two_round_trips(
    async_client: Any, backend: Any, round_trips: RoundTrips
):
    warm = await async_client.post("/t/warm/abump", headers={"Idempotency-Key": "w"})
    assert warm.status_code == 201
    with round_trips as rt:
        response = await async_client.post("/t/rt2/abump", headers={"Idempotency-Key": "k2"})
    assert response.status_code == 201
    assert rt.count == 2


def test_pessimistic_request_is_two_round_trips(client: Any, backend: Any, round_trips: RoundTrips):
    from tests.django import views

    views.gate("rt3")[1].set()  # the gated 'locked' view must not wait
    _warm(client, "/t/rt3/locked")
    with round_trips as rt:
        response = client.post("/t/rt3/locked", HTTP_IDEMPOTENCY_KEY="k3")
    assert response.status_code == 200
    assert rt.count == 2
    assert machines["ticket"].objects.get("ticket:rt3").version == 2


async def test_async_pessimistic_request_is_two_round_trips(
    async_client: Any, backend: Any, round_trips: RoundTrips
):
    await async_client.post("/t/rt4/alocked", headers={"Idempotency-Key": "w"})
    with round_trips as rt:
        response = await async_client.post("/t/rt4/alocked", headers={"Idempotency-Key": "k4"})
    assert response.status_code == 200
    assert rt.count == 2


def test_a_replay_is_one_round_trip(client: Any, backend: Any, round_trips: RoundTrips):
    _warm(client, "/t/rt5/bump")
    client.post("/t/rt5/bump", HTTP_IDEMPOTENCY_KEY="k5")
    with round_trips as rt:
        replay = client.post("/t/rt5/bump", HTTP_IDEMPOTENCY_KEY="k5")
    assert replay["Idempotent-Replayed"] == "true"
    assert rt.count == 1


def test_a_read_only_request_is_one_round_trip(client: Any, backend: Any, round_trips: RoundTrips):
    _warm(client, "/t/rt6/bump")
    with round_trips as rt:
        assert client.get("/t/rt6/show").status_code == 200
    assert rt.count == 1
