"""The default lock, adaptive: a request takes no lock until its block
conflicts, then its re-run waits in the lock's queue; on a hot key every
concurrent request gets through. On fakeredis and on the live server."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.test import Client

from django_xsm import conf
from django_xsm.registry import machines
from tests.django import views

THREADS = 16


def _default_lock_settings(settings: Any, xsm: Any) -> None:
    # The test settings shorten the lock's wait; the library's defaults here.
    defaults = {"LOCK": "adaptive", "LOCK_TIMEOUT_S": 1.0, "CONFLICT_RETRIES": 3}
    xsm(**{name: conf.DEFAULTS[name] for name in defaults})
    assert {name: settings.XSM[name] for name in defaults} == defaults


@pytest.mark.parametrize("view", ["probe_lock", "aprobe_lock"])
def test_an_uncontended_request_takes_no_lock(backend: Any, view: str):
    assert Client().post(f"/t/a1/{view}").status_code == 200
    assert views.LOCKS_SEEN["a1"] == [("OptimisticLock", "", None)]
    assert backend.store.lock_holder("ticket:a1") is None


@pytest.mark.parametrize("view", ["probe_lock", "aprobe_lock"])
def test_a_conflict_makes_the_retry_wait_in_the_lock_queue(backend: Any, view: str):
    Client().post(f"/t/a2/{view}")
    views.LOCKS_SEEN.clear()
    views.RACES["a2"] = 1  # another writer commits during the first attempt
    response = Client().post(f"/t/a2/{view}")
    assert response.status_code == 200
    first, retry = views.LOCKS_SEEN["a2"]
    assert first == ("OptimisticLock", "", None)
    strategy, token, holder = retry
    # the re-run opened with the queueing lock and held it in Redis
    assert strategy == "PessimisticLock" and token and holder == token
    assert backend.store.lock_holder("ticket:a2") is None  # released at commit
    assert machines["ticket"].objects.get("ticket:a2").context["count"] == 3


@pytest.mark.parametrize("view", ["bump", "abump"])
def test_concurrent_requests_on_one_key_all_succeed_with_the_default_settings(
    backend: Any, settings: Any, xsm: Any, view: str
):
    _default_lock_settings(settings, xsm)
    assert Client().post(f"/t/a3/{view}", HTTP_IDEMPOTENCY_KEY="create").status_code == 201
    barrier = threading.Barrier(THREADS)
    statuses: list[int] = []

    def run(index: int) -> None:
        client = Client()
        barrier.wait(10)
        statuses.append(client.post(f"/t/a3/{view}", HTTP_IDEMPOTENCY_KEY=f"k{index}").status_code)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert statuses == [201] * THREADS  # not one 409
    final = machines["ticket"].objects.get("ticket:a3")
    # each request applied exactly once: no update lost, none doubled
    assert final.context["count"] == 1 + THREADS
    assert final.version == 1 + THREADS
    assert len(machines["ticket"].objects.history("ticket:a3")) == 1 + THREADS
    assert backend.store.lock_holder("ticket:a3") is None
