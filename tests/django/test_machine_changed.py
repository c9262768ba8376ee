"""A chart changed without a version bump (or without a migration):
``check --deploy`` says so before the deploy (``xsm.E015``), and a request
on a stored instance answers the problem ``machine-changed``, not
``internal``. On fakeredis and, with ``XSM_REDIS_URL``, the live server."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from django_xsm.backend.readiness import CHANGE_SAMPLE, changed_machines
from django_xsm.checks import check_deploy
from django_xsm.engine import Machine
from django_xsm.registry import machines
from tests.django import machines as charts
from tests.django.conftest import problem
from tests.support import RoundTrips


def stored(*keys: str) -> None:
    """Commit each ticket with today's chart (one BUMP each)."""
    for key in keys:
        with machines["ticket"].objects.open(key, actor="test") as block:
            block.send("BUMP")


#: The chart that stores the instances of these tests.
TODAY = charts.ticket


def deploy(monkeypatch: pytest.MonkeyPatch, chart: Machine) -> None:
    """Run ``chart`` as the ticket machine from now on, on the same store
    (changing XSM would empty the embedded one)."""
    monkeypatch.setattr(charts, "ticket", chart)
    machines.reset()


def e015(messages: list[Any]) -> list[Any]:
    return [m for m in messages if m.id == "xsm.E015"]


# --- check --deploy -----------------------------------------------------------------


def test_deploy_check_reports_a_chart_changed_without_a_version_bump(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored("ticket:c1", "ticket:c2")
    assert e015(check_deploy()) == []  # the code that wrote them reads them
    deploy(monkeypatch, charts.ticket_renamed)
    [error] = e015(check_deploy())
    assert error.level == 40  # an error: `check --deploy` exits non-zero
    assert "Machine 'ticket' (version '')" in error.msg
    assert "2 of the 2 stored instance(s) sampled cannot be loaded" in error.msg
    assert "'ticket:c1'" in error.msg and "for another chart structure" in error.msg
    assert "bump the machine version" in error.hint and "Changing a chart" in error.hint


def test_deploy_check_accepts_a_version_bump_with_its_migration(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored("ticket:m1")
    deploy(monkeypatch, charts.ticket_v2)
    assert e015(check_deploy()) == []
    # the migration really runs on load: the renamed state is reachable
    machines["ticket"].objects.send("ticket:m1", "CLOSE", actor="test")
    assert machines["ticket"].objects.get("ticket:m1").value == "resolved"


@pytest.mark.parametrize(
    ("chart", "reason"),
    [
        ("ticket_v2_unmigrated", "No migration turns snapshot version ''"),
        ("ticket_v2_broken", "a migration of 'ticket' raised KeyError: 'no_such_field'"),
    ],
)
def test_deploy_check_reports_a_version_that_cannot_be_migrated(
    backend: Any, monkeypatch: pytest.MonkeyPatch, chart: str, reason: str
) -> None:
    stored("ticket:v1")
    deploy(monkeypatch, getattr(charts, chart))
    [error] = e015(check_deploy())
    assert "Machine 'ticket' (version '2')" in error.msg and reason in error.msg


def test_deploy_check_reads_a_bounded_sample(
    backend: Any, monkeypatch: pytest.MonkeyPatch, round_trips: RoundTrips
) -> None:
    stored(*(f"ticket:s{i:02}" for i in range(CHANGE_SAMPLE + 5)))
    stored("ticket:s99")  # beyond the sample in key order
    deploy(monkeypatch, charts.ticket_renamed)
    chart: Machine = machines["ticket"].machine
    store = backend.store
    store.list_page(limit=1)  # the schema marker is read once per store: not counted
    with round_trips as rt:
        [found] = changed_machines(store, [chart, chart])  # one machine, named twice
    assert (found.sampled, found.failed, found.key) == (CHANGE_SAMPLE, CHANGE_SAMPLE, "ticket:s00")
    # one listing (a pipeline of one script per bucket), then one read per sampled instance
    assert rt.count == 1 + CHANGE_SAMPLE


def test_deploy_check_skips_corrupt_records_and_other_machines(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored("ticket:k1")
    with machines["order"].objects.open("order:k1", actor="test") as block:
        block.send("ADD_ITEM", sku="s", qty=1, price_cents=100)  # the order chart's own event
    assert machines["order"].objects.exists("order:k1")
    deploy(monkeypatch, charts.ticket_renamed)
    [found] = changed_machines(backend.store, [e.machine for e in machines.values()])
    assert found.machine_id == "ticket" and found.sampled == 1


def test_deploy_check_does_not_crash_when_redis_is_down(xsm: Any, settings: Any) -> None:
    xsm(
        REDIS_URL="redis://127.0.0.1:1/0",
        EMBEDDED=None,
        SOCKET_TIMEOUT_S=0.2,
        MACHINES={**settings.XSM["MACHINES"], "ticket": "tests.django.machines.ticket_renamed"},
    )
    assert e015(check_deploy()) == []


# --- at request time --------------------------------------------------------------------


@pytest.mark.parametrize("view", ["bump", "abump"])
def test_a_request_on_an_instance_of_a_changed_chart_is_a_machine_changed_problem(
    client: Any, backend: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any, view: str
) -> None:
    stored("ticket:r1")
    before = machines["ticket"].objects.get("ticket:r1").version
    deploy(monkeypatch, charts.ticket_renamed)
    with caplog.at_level(logging.ERROR, logger="django_xsm.http"):
        response = client.post(f"/t/r1/{view}", HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 500
    body = problem(response)
    assert body["type"] == "http://testserver/_xsm/problems/machine-changed"
    assert "another chart structure" in body["detail"]
    assert "Retry-After" not in response  # an operator must act first
    [line] = [r for r in caplog.records if r.name == "django_xsm.http"]
    assert line.levelno == logging.ERROR and line.exc_info is None  # no traceback
    assert "machine 'ticket'" in line.getMessage() and "Changing a chart" in line.getMessage()
    deploy(monkeypatch, TODAY)  # the old chart reads it: nothing was written
    assert machines["ticket"].objects.get("ticket:r1").version == before
    page = client.get(body["type"])
    assert page.status_code == 200 and b"another version of its chart" in page.content
