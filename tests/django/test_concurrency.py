"""Concurrent requests from threads: duplicates have one effect, and no
update is lost, on fakeredis and on the live server."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from django.test import Client

from django_xsm.registry import machines
from tests.django import views

THREADS = 8


def _storm(url: str, headers: list[dict[str, str]]) -> list[Any]:
    """POST ``url`` once per header dict, all threads released at once."""
    barrier = threading.Barrier(len(headers))
    responses: list[Any] = [None] * len(headers)

    def run(index: int) -> None:
        client = Client()
        barrier.wait(10)
        responses[index] = client.post(url, **headers[index])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(headers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(r is not None for r in responses)
    return responses


@pytest.mark.parametrize("view", ["bump", "abump"])
def test_duplicate_requests_have_exactly_one_effect(backend: Any, view: str):
    responses = _storm(f"/t/d1/{view}", [{"HTTP_IDEMPOTENCY_KEY": "same"}] * THREADS)
    kinds = Counter(
        "replay"
        if r.get("Idempotent-Replayed") == "true"
        else ("first" if r.status_code == 201 else r.status_code)
        for r in responses
    )
    assert kinds["first"] == 1, kinds
    assert set(kinds) <= {"first", "replay", 409}, kinds
    for r in responses:
        if r.status_code == 409:
            assert r["Retry-After"]
            assert r.json()["type"].endswith("/problems/in-flight")
    assert views.CALLS[view] == 1
    view_of = machines["ticket"].objects.get("ticket:d1")
    assert view_of.context["count"] == 1
    assert view_of.version == 1
    assert len(machines["ticket"].objects.history("ticket:d1")) == 1
    # every retry after the storm is a replay of the single first response
    first = next(r for r in responses if r.status_code == 201 and "Idempotent-Replayed" not in r)
    again = Client().post(f"/t/d1/{view}", HTTP_IDEMPOTENCY_KEY="same")
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content


def test_a_slow_first_request_makes_duplicates_409_then_replay(backend: Any):
    entered, release = views.gate("d2")
    first: list[Any] = []
    thread = threading.Thread(
        target=lambda: first.append(Client().post("/t/d2/gated", HTTP_IDEMPOTENCY_KEY="k"))
    )
    thread.start()
    assert entered.wait(10)
    during = _storm("/t/d2/gated", [{"HTTP_IDEMPOTENCY_KEY": "k"}] * 4)
    release.set()
    thread.join(10)
    assert [r.status_code for r in during] == [409] * 4
    assert first[0].status_code == 201
    after = Client().post("/t/d2/gated", HTTP_IDEMPOTENCY_KEY="k")
    assert after["Idempotent-Replayed"] == "true"
    assert views.CALLS["gated"] == 1
    assert machines["ticket"].objects.get("ticket:d2").context["count"] == 1


def test_distinct_requests_lose_no_update(backend: Any, xsm: Any):
    xsm(CONFLICT_RETRIES=20)
    Client().post("/t/d3/bump", HTTP_IDEMPOTENCY_KEY="create")
    responses = _storm("/t/d3/bump", [{"HTTP_IDEMPOTENCY_KEY": f"k{i}"} for i in range(THREADS)])
    ok = [r for r in responses if r.status_code == 201]
    assert all(r.status_code in (201, 409) for r in responses)
    final = machines["ticket"].objects.get("ticket:d3")
    # each successful request added exactly one; nothing was overwritten
    assert final.context["count"] == 1 + len(ok)
    assert final.version == 1 + len(ok)
    assert len(ok) >= THREADS // 2  # the retries let (nearly) everyone through


def test_pessimistic_requests_serialise(backend: Any, xsm: Any):
    xsm(LOCK_TIMEOUT_S=5.0)
    Client().post("/t/d4/optional_key")
    responses = _storm("/t/d4/alocked", [{}] * THREADS)
    assert [r.status_code for r in responses] == [200] * THREADS
    assert machines["ticket"].objects.get("ticket:d4").context["count"] == 1 + THREADS
