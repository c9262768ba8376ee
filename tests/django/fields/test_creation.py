"""A new row's instance exists once its INSERT commits: its initial timers
armed (the scanner fires them), its initial emitted events in the outbox,
fenced against a concurrent first send; a rollback creates nothing; Redis
down at that moment keeps the row, logs one WARNING and leaves the
creation to ``xsm_sync_models``. On SQLite and PostgreSQL, on fakeredis
and a live Redis, with real commits."""

from __future__ import annotations

import copy
import io
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core import serializers
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.test.utils import isolate_apps

from django_xsm import backend as stores
from django_xsm.backend.build import get_outbox
from django_xsm.fields import BoundStatechart
from django_xsm.persistence import retry_on_conflict
from django_xsm.registry import machines
from tests.django.fields.conftest import DB_ALIASES
from tests.fieldapp.machines import DESK_ENTRY_FAILS
from tests.fieldapp.models import Order, Ticket

pytestmark = pytest.mark.django_db(databases=DB_ALIASES, transaction=True)

DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


class _Rollback(Exception):
    pass


def desk_row(ticket: Ticket) -> tuple[str, int]:
    """(state, version) of the ticket's row as the database holds it."""
    found = Ticket.objects.using(ticket._state.db).values_list("status", "status_version")
    return found.get(pk=ticket.pk)


def emitted(key: str) -> list[str]:
    """The event types in the outbox's streams for ``key``, in order."""
    pending = get_outbox().pending(limit=1000)
    return [entry.event_type for entry, _who, _idle in pending if entry.key == key]


@pytest.fixture
def clock_behind() -> Iterator[Any]:
    """``clock_behind(ms)``: the store's clock runs ``ms`` behind from now
    on, so the deadlines armed meanwhile are already due by real time."""
    store = stores.get_store()
    real = store.clock

    def behind(ms: int) -> None:
        store.clock = lambda: real() - ms

    yield behind
    store.clock = real


def scan() -> dict[str, int]:
    out = io.StringIO()
    call_command("xsm_scan_timers", stdout=out)
    found = dict(re.findall(r"(\w+)=(\d+)", out.getvalue()))
    return {k: int(v) for k, v in found.items()}


# --- the instance exists, its timer fires ------------------------------------------


def test_a_new_rows_initial_timer_fires_through_the_scanner(
    routed: str, backend: Any, clock_behind: Any
) -> None:
    alias = routed  # the scanner's commit moves the row in the router's database
    clock_behind(60_000)  # created a minute ago: its 5 s timer is overdue
    ticket = Ticket.objects.using(alias).create(title="printer on fire")
    key = f"desk:{ticket.pk}"
    view = machines["desk"].objects.get(key)
    assert view.value == "open" and view.version == 1 and view.context["opened"] == 1
    [deadline] = view.deadlines
    assert deadline.event_type.startswith("xstate.after")
    assert emitted(key) == ["desk.opened"]  # the entry action's event, queued once
    assert desk_row(ticket) == ("open", 1)  # the row moved to the created version
    assert ticket.status_version == 1
    inspected = io.StringIO()
    call_command("xsm_inspect", key, stdout=inspected)  # the key exists
    assert "deadlines     1" in inspected.getvalue()
    clock_behind(0)
    result = scan()
    assert result["scanned"] == 1 and result["fired"] == 1 and result["errors"] == 0
    assert machines["desk"].objects.get(key).value == "escalated"
    assert desk_row(ticket) == ("escalated", 2)  # the scanner's commit moved the row
    assert emitted(key) == ["desk.opened", "desk.escalated"]


def test_save_of_a_new_object_and_a_model_bound_view_with_create_false(
    alias: str, backend: Any
) -> None:
    ticket = Ticket(title="new")
    ticket.save(using=alias)
    assert machines["desk"].objects.get(f"desk:{ticket.pk}").deadlines
    ticket.title = "renamed"
    ticket.save()  # an UPDATE creates nothing again
    assert machines["desk"].objects.get(f"desk:{ticket.pk}").version == 1
    order = Order.objects.using(alias).create()  # an auto primary key
    assert machines["shop"].objects.get(f"shop:{order.pk}").version == 1


def test_bulk_create_creates_every_instance(alias: str, backend: Any) -> None:
    tickets = Ticket.objects.using(alias).bulk_create([Ticket(title=str(n)) for n in range(3)])
    orders = Order.objects.using(alias).bulk_create([Order(total=n) for n in range(3)])
    for ticket in tickets:
        assert machines["desk"].objects.get(f"desk:{ticket.pk}").deadlines
        assert desk_row(ticket) == ("open", 1)
    for order in orders:  # primary keys the database returned
        assert order.pk is not None
        assert machines["shop"].objects.get(f"shop:{order.pk}").version == 1


def test_a_proxy_models_create_creates_the_instance(alias: str, backend: Any) -> None:
    with isolate_apps("tests.fieldapp"):

        class ProxyTicket(Ticket):
            class Meta:
                proxy = True
                app_label = "fieldapp"

    ticket = ProxyTicket.objects.using(
        alias
    ).create()  # autocommit: post_save's sender is the proxy
    assert machines["desk"].objects.get(f"desk:{ticket.pk}").version == 1
    assert desk_row(ticket) == ("open", 1)


def test_acreate_and_asave_create_the_instance(alias: str, backend: Any) -> None:
    async def make() -> tuple[Ticket, Ticket]:
        first = await Ticket.objects.using(alias).acreate(title="async")
        second = Ticket(title="asave")
        await second.asave(using=alias)
        return first, second

    for ticket in async_to_sync(make)():
        view = machines["desk"].objects.get(f"desk:{ticket.pk}")
        assert view.version == 1 and view.deadlines and view.context["opened"] == 1


# --- transactions ------------------------------------------------------------------


def test_the_instance_waits_for_the_commit_and_a_rollback_creates_nothing(
    alias: str, backend: Any
) -> None:
    with transaction.atomic(using=alias):
        kept = Ticket.objects.using(alias).create(title="kept")
        assert not machines["desk"].objects.exists(f"desk:{kept.pk}")  # not before the commit
        try:
            with transaction.atomic(using=alias):  # a savepoint rolled back
                dropped = Ticket.objects.using(alias).create(title="dropped")
                raise _Rollback
        except _Rollback:
            pass
    assert machines["desk"].objects.exists(f"desk:{kept.pk}")
    assert not machines["desk"].objects.exists(f"desk:{dropped.pk}")
    with pytest.raises(_Rollback), transaction.atomic(using=alias):
        gone = Ticket.objects.using(alias).create(title="gone")
        Order.objects.using(alias).bulk_create([Order(total=1)])
        raise _Rollback
    assert not machines["desk"].objects.exists(f"desk:{gone.pk}")
    assert list(backend.store.list_keys("shop:")) == []


def test_a_send_before_the_commit_creates_it_and_the_creation_does_nothing(
    alias: str, backend: Any
) -> None:
    with transaction.atomic(using=alias):
        ticket = Ticket.objects.using(alias).create()
        ticket.status.send("ASSIGN")  # the first send starts the instance (v1)
    view = machines["desk"].objects.get(f"desk:{ticket.pk}")
    assert (view.value, view.version, view.context["opened"]) == ("assigned", 1, 1)
    assert emitted(f"desk:{ticket.pk}") == ["desk.opened"]
    assert desk_row(ticket) == ("assigned", 1)


def test_a_row_deleted_before_the_commit_gets_no_instance(alias: str, backend: Any) -> None:
    with transaction.atomic(using=alias):
        ticket = Ticket.objects.using(alias).create()
        pk = ticket.pk
        ticket.delete()  # clears ticket.pk
    assert not machines["desk"].objects.exists(f"desk:{pk}")


# --- fenced against a concurrent first send ----------------------------------------


def test_a_first_send_committing_inside_the_creation_wins_and_the_creation_is_a_noop(
    alias: str, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The creation opened the absent instance (and ran the initial entry);
    another writer's first send commits before the creation's commit."""
    from django_xsm.persistence.block.state import BlockState

    real = BlockState.save_created
    raced: list[str] = []

    def racing(block: Any) -> None:
        real(block)
        if not raced:
            raced.append(block.key)
            machines["desk"].objects.send(block.key, "ASSIGN", create=True, actor="other")

    monkeypatch.setattr(BlockState, "save_created", racing)
    ticket = Ticket.objects.using(alias).create()
    key = f"desk:{ticket.pk}"
    assert raced == [key]
    view = machines["desk"].objects.get(key)
    # the send's commit stands alone: one initial entry, one emitted event
    assert (view.value, view.version, view.context["opened"]) == ("assigned", 1, 1)
    assert emitted(key) == ["desk.opened"]
    assert desk_row(ticket) == ("assigned", 1)
    assert BoundStatechart(ticket, Ticket._meta.get_field("status")).create() is False


def test_a_creation_committing_inside_a_first_send_makes_the_send_run_again_once(
    alias: str, backend: Any
) -> None:
    """The first send opened the absent instance (and ran the initial
    entry); the row's creation commits before the send's commit, which
    conflicts and runs again on the created instance."""
    ticket = _raw_ticket(alias)
    key = f"desk:{ticket.pk}"
    seen: list[int] = []

    def attempt() -> Any:
        with machines["desk"].objects.open(key, actor="sender") as block:
            if not seen:  # the row's creation lands first
                assert BoundStatechart(ticket, Ticket._meta.get_field("status")).create()
            seen.append(block.version)
            return block.send("ASSIGN")

    assert retry_on_conflict(attempt, attempts=3).accepted
    assert seen == [0, 1]  # ran again, on the created instance
    view = machines["desk"].objects.get(key)
    assert (view.value, view.version, view.context["opened"]) == ("assigned", 2, 1)
    assert emitted(key) == ["desk.opened"]  # the discarded attempt's event never left


def _raw_ticket(alias: str) -> Ticket:
    """A ticket row saved raw (as loaddata does): no instance was created."""
    dumped = serializers.serialize("json", [Ticket(title="fixture")])
    for obj in serializers.deserialize("json", dumped):
        obj.save(using=alias)
    ticket = Ticket.objects.using(alias).get()
    assert not machines["desk"].objects.exists(f"desk:{ticket.pk}")
    return ticket


# --- Redis unreachable when the INSERT commits ---------------------------------------


def test_redis_down_keeps_the_row_warns_once_and_the_reconciler_creates_it(
    alias: str, backend: Any, xsm: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    up = copy.deepcopy(settings.XSM)
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    caplog.set_level(logging.WARNING, logger="django_xsm")
    ticket = Ticket.objects.using(alias).create(title="while Redis is down")  # raises nothing
    assert Ticket.objects.using(alias).filter(pk=ticket.pk).exists()
    assert desk_row(ticket) == ("open", 0)
    # one line names the row (besides the outage's own line on django_xsm.redis)
    [record] = [r for r in caplog.records if r.name == "django_xsm.fields"]
    assert record.levelno == logging.WARNING
    line = record.getMessage()
    assert f"fieldapp.Ticket pk={ticket.pk!r}" in line and "xsm_sync_models" in line
    assert "StoreUnavailableError" in line
    assert "127.0.0.1" not in line and "redis://" not in line
    settings.XSM = up  # Redis is back
    key = f"desk:{ticket.pk}"
    assert not machines["desk"].objects.exists(key)
    out = io.StringIO()
    call_command("xsm_sync_models", "--model", "fieldapp.Ticket", "--database", alias,
                 "--dry-run", stdout=out)  # fmt: skip
    assert f"would create: {key}" in out.getvalue()
    assert "would create 1 instance(s)" in out.getvalue()
    assert not machines["desk"].objects.exists(key)  # a dry run only lists it
    with pytest.raises(CommandError) as found:
        call_command("xsm_sync_models", "--model", "fieldapp.Ticket", "--database", alias,
                     "--dry-run", "--check", stdout=io.StringIO())  # fmt: skip
    assert found.value.returncode == 3
    out = io.StringIO()
    call_command("xsm_sync_models", "--model", "fieldapp.Ticket", "--database", alias,
                 stdout=out)  # fmt: skip
    assert "created 1 instance(s)" in out.getvalue()
    view = machines["desk"].objects.get(key)
    assert view.version == 1 and view.deadlines and emitted(key) == ["desk.opened"]
    assert desk_row(ticket) == ("open", 1)
    again = io.StringIO()
    call_command("xsm_sync_models", "--model", "fieldapp.Ticket", "--database", alias,
                 "--check", stdout=again)  # fmt: skip
    assert "created" not in again.getvalue()


def test_redis_down_inside_a_transaction_raises_nothing_at_its_commit(
    alias: str, backend: Any, xsm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    xsm(REDIS_URL=DOWN, EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    caplog.set_level(logging.WARNING, logger="django_xsm")
    with transaction.atomic(using=alias):
        tickets = Ticket.objects.using(alias).bulk_create([Ticket(), Ticket()])
    assert Ticket.objects.using(alias).count() == 2
    warned = [r.getMessage() for r in caplog.records if r.name == "django_xsm.fields"]
    assert sorted(warned) == sorted(
        f"fieldapp.Ticket pk={t.pk!r}: its statechart was not created when the row was saved "
        "(StoreUnavailableError); 'manage.py xsm_sync_models' creates it"
        for t in tickets
    )


def test_the_reconciler_creates_the_instances_of_raw_saves_and_fixtures(
    alias: str, backend: Any
) -> None:
    ticket = _raw_ticket(alias)  # loaddata's path
    key = f"desk:{ticket.pk}"
    report = _sync(alias, dry_run=True)
    assert report.created == [key] and report.dry_run and report.findings
    assert not machines["desk"].objects.exists(key)
    report = _sync(alias)
    assert report.created == [key] and not report.missing
    assert machines["desk"].objects.get(key).deadlines
    assert _sync(alias).created == []  # nothing left to create


def test_a_row_whose_instance_redis_lost_is_reported_not_recreated(
    alias: str, backend: Any
) -> None:
    ticket = Ticket.objects.using(alias).create()
    ticket.status.send("ASSIGN")
    backend.store.forget(f"desk:{ticket.pk}")
    report = _sync(alias)
    assert report.missing == [f"desk:{ticket.pk}"] and report.created == []
    assert not machines["desk"].objects.exists(f"desk:{ticket.pk}")  # "assigned" is not reset


def test_an_entry_action_that_raises_fails_that_row_only(
    alias: str, backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    DESK_ENTRY_FAILS.append("the welcome mail template is missing")
    try:
        caplog.set_level(logging.WARNING, logger="django_xsm")
        ticket = Ticket.objects.using(alias).create()  # raises nothing: the row is committed
        [record] = [r for r in caplog.records if r.name == "django_xsm.fields"]
        assert record.levelno == logging.ERROR and f"pk={ticket.pk!r}" in record.getMessage()
        assert record.exc_info is not None  # a bug in the chart's code: its traceback
        report = _sync(alias)
        assert report.failed == [
            (f"desk:{ticket.pk}", "RuntimeError: the welcome mail template is missing")
        ]
        assert report.created == []
    finally:
        DESK_ENTRY_FAILS.clear()
    assert _sync(alias).created == [f"desk:{ticket.pk}"]


def _sync(alias: str, **kwargs: Any) -> Any:
    from django_xsm.fields.sync import sync_field

    return sync_field(Ticket._meta.get_field("status"), using=alias, **kwargs)
