"""``@stateful_view(speculative=True)`` and ``XSM["SPECULATIVE"]``.

A keyed request on a key this worker committed last costs one Redis round
trip (the commit); a retry whose key had finished gets the stored answer
even when it is found only at commit; a stale memory (another worker
committed) is a conflict that the view's retry turns into one applied
event. Counted with redis-py's packets, on fakeredis and the live server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_xsm import conf
from django_xsm.decorators import stateful_view
from django_xsm.persistence import persisted
from django_xsm.redis import RedisStore
from django_xsm.registry import machines
from tests.django import views
from tests.django.conftest import RoundTrips


def _post(client: Any, url: str, key: str) -> Any:
    return client.post(url, HTTP_IDEMPOTENCY_KEY=key)


def _other_worker_bumps(backend: Any, tid: str) -> None:
    """A commit by another worker: a store of its own on the same namespace."""
    other = RedisStore(backend.client, prefix=conf.get_settings().prefix)
    with persisted(other, f"ticket:{tid}", machines["ticket"].machine) as block:
        block.send("BUMP")


def test_a_warm_keyed_request_is_one_round_trip(client: Any, backend: Any, round_trips: RoundTrips):
    assert _post(client, "/t/s1/sbump", "a").status_code == 201  # cold: 2 round trips
    with round_trips as rt:
        response = _post(client, "/t/s1/sbump", "b")
    assert response.status_code == 201
    assert json.loads(response.content)["count"] == 2
    assert rt.count == 1
    history = machines["ticket"].objects.history("ticket:s1")
    assert [r.idempotency_key for r in history] == ["a", "b"]


def test_a_retry_found_at_commit_gets_the_stored_answer(
    client: Any, backend: Any, round_trips: RoundTrips
):
    first = _post(client, "/t/s2/sbump", "a")
    _post(client, "/t/s2/sbump", "b")
    with round_trips as rt:
        again = _post(client, "/t/s2/sbump", "b")  # warm: the view runs, then replays
    assert again["Idempotent-Replayed"] == "true"
    assert json.loads(again.content)["count"] == 2  # what "b" answered, not a third bump
    assert rt.count == 1
    assert views.CALLS["sbump"] == 3
    assert machines["ticket"].objects.get("ticket:s2").context["count"] == 2
    assert json.loads(first.content)["count"] == 1


def test_a_stale_memory_is_retried_once_and_applied_once(client: Any, backend: Any):
    _post(client, "/t/s3/sbump", "a")
    _other_worker_bumps(backend, "s3")
    response = _post(client, "/t/s3/sbump", "b")
    assert response.status_code == 201
    assert json.loads(response.content)["count"] == 3
    assert views.CALLS["sbump"] == 3  # a, then b twice: the stale run and the retry
    assert machines["ticket"].objects.get("ticket:s3").context["count"] == 3


def test_a_refusal_on_a_stale_memory_is_retried_not_answered(client: Any, backend: Any):
    _post(client, "/t/s4/sbump", "a")  # count 1: CLOSE's guard passes
    with persisted(
        RedisStore(backend.client, prefix=conf.get_settings().prefix),
        "ticket:s4",
        machines["ticket"].machine,
    ) as block:
        block.send("CLOSE")  # another worker closed it
        block.send("REOPEN")
    # our memory says "open" at v2; the store says "open" at v4: the warm
    # commit is refused as stale and the retry closes the current record
    response = _post(client, "/t/s4/sclose", "c")
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["state"] == "closed"
    assert views.CALLS["sclose"] == 2


async def test_an_async_warm_request_is_one_round_trip(
    async_client: Any, backend: Any, round_trips: RoundTrips
):
    first = await async_client.post("/t/s5/asbump", headers={"Idempotency-Key": "a"})
    assert first.status_code == 201
    with round_trips as rt:
        second = await async_client.post("/t/s5/asbump", headers={"Idempotency-Key": "b"})
        replay = await async_client.post("/t/s5/asbump", headers={"Idempotency-Key": "b"})
    assert second.status_code == 201 and json.loads(second.content)["count"] == 2
    assert replay["Idempotent-Replayed"] == "true"
    assert json.loads(replay.content)["count"] == 2
    assert rt.count == 2


def test_the_setting_makes_every_optimistic_view_speculative(
    client: Any, backend: Any, xsm: Any, round_trips: RoundTrips
):
    xsm(SPECULATIVE=True)
    _post(client, "/t/s6/bump", "a")
    with round_trips as rt:
        assert _post(client, "/t/s6/bump", "b").status_code == 201
    assert rt.count == 1


def test_the_setting_leaves_pessimistic_views_alone(
    client: Any, backend: Any, xsm: Any, round_trips: RoundTrips
):
    xsm(SPECULATIVE=True)
    views.gate("s7")[1].set()
    client.post("/t/s7/locked")
    with round_trips as rt:
        assert client.post("/t/s7/locked").status_code == 200
    assert rt.count == 2  # the lock is taken by the open


@pytest.mark.parametrize("bad", ["yes", 1, [True]])
def test_stateful_view_refuses_a_non_bool(bad: Any):
    with pytest.raises(ImproperlyConfigured, match="speculative"):
        stateful_view("ticket", key="ticket:{tid}", speculative=bad)


@pytest.mark.parametrize("bad", ["yes", None, 2])
def test_the_setting_must_be_a_bool(xsm: Any, bad: Any):
    from django_xsm.exceptions import InvalidConfigError

    xsm(SPECULATIVE=bad)
    with pytest.raises((ImproperlyConfigured, InvalidConfigError), match="SPECULATIVE"):
        conf.get_settings()
