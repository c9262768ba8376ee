"""StatechartField: the column, its companion, the bound value, sends and
reads, on SQLite and PostgreSQL, on fakeredis and a live Redis."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core import serializers
from django.db import connections

from django_xsm.exceptions import (
    EventNotAcceptedError,
    StateAssignmentError,
    UnsavedInstanceError,
)
from django_xsm.fields import AvailableEvent, BoundStatechart, StatechartVersionField
from django_xsm.persistence import ReplayedReceipt
from django_xsm.registry import machines
from tests.django.fields.conftest import DB_ALIASES
from tests.fieldapp.models import Order, Parcel, SlugOrder, UuidOrder

pytestmark = pytest.mark.django_db(databases=DB_ALIASES)


def row_in_db(model: Any, pk: Any, alias: str) -> tuple[str, int]:
    """What the database holds, read with SQL (not through the model)."""
    table = model._meta.db_table
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT status, status_version FROM {table} WHERE id = %s", [pk])
        status, version = cursor.fetchone()
    return status, version


def test_a_new_row_shows_the_initial_state_and_version_zero(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create(total=10)
    assert isinstance(order.status, BoundStatechart)
    assert order.status == "cart" and str(order.status) == "cart"
    assert order.status_version == 0
    assert row_in_db(Order, order.pk, alias) == ("cart", 0)
    assert machines["shop"].objects.exists(order.status.key) is False  # created on first send
    field = Order._meta.get_field("status_version")
    assert isinstance(field, StatechartVersionField) and not field.editable
    assert Order._meta.get_field("status").db_index


def test_send_commits_in_redis_and_moves_the_row_forward(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    receipt = order.status.send("ADD", actor="alice", n=2)
    assert receipt.accepted and order.status.key == f"shop:{order.pk}"
    assert order.status.send("PAY", amount=10).accepted
    assert order.status == "paid" and order.status_version == 2
    assert row_in_db(Order, order.pk, alias) == ("paid", 2)
    record = backend.store.load(f"shop:{order.pk}")
    assert record.version == 2 and record.snapshot["context"] == {"items": 2}
    assert order.status.context == {"items": 2} and order.status.version == 2
    assert [(r.event_type, r.actor) for r in order.status.history()] == [
        ("ADD", "alice"),
        ("PAY", ""),
    ]


def test_plain_orm_queries_filter_on_the_projected_column(alias: str, backend: Any) -> None:
    rows = [Order.objects.using(alias).create() for _ in range(3)]
    rows[0].status.send("PAY_ANYWAY")
    rows[1].status.send("PAY_ANYWAY")
    rows[1].status.send("SHIP")
    assert Order.objects.using(alias).filter(status="paid").count() == 1
    assert Order.objects.using(alias).filter(status="cart").get().pk == rows[2].pk
    assert set(Order.objects.using(alias).values_list("status", flat=True)) == {
        "cart",
        "paid",
        "shipped",
    }


def test_compound_and_parallel_states_project_dotted_leaves(alias: str, backend: Any) -> None:
    parcel = Parcel.objects.using(alias).create()
    assert parcel.state == "packing"
    parcel.state.send("PACKED")
    assert parcel.state == "shipping.picked"
    assert Parcel.objects.using(alias).filter(state__startswith="shipping").count() == 1
    parcel.state.send("SPLIT")
    # parallel regions: leaves in document order, joined with ","
    assert str(parcel.state) == "tracking.road.moving,tracking.customs.pending"
    assert parcel.state.value == {"tracking": {"road": "moving", "customs": "pending"}}


def test_assigning_a_state_is_refused_and_changes_nothing(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    with pytest.raises(StateAssignmentError) as err:
        order.status = "paid"
    assert isinstance(err.value, AttributeError)
    assert "only through events" in str(err.value) and "send" in str(err.value)
    assert order.status == "cart" and row_in_db(Order, order.pk, alias) == ("cart", 0)


def test_loading_refreshing_deferring_and_fixtures_still_work(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create(total=5)
    stale = Order.objects.using(alias).get(pk=order.pk)
    order.status.send("PAY_ANYWAY")
    assert stale.status == "cart"
    stale.refresh_from_db()  # django-fsm's protected=True broke exactly this
    assert stale.status == "paid" and stale.status_version == 1
    deferred = Order.objects.using(alias).only("total").get(pk=order.pk)
    assert deferred.status == "paid"  # the deferred column loads on access
    dumped = serializers.serialize("json", Order.objects.using(alias).filter(pk=order.pk))
    assert '"status": "paid"' in dumped and '"status_version": 1' in dumped
    Order.objects.using(alias).filter(pk=order.pk).delete()
    for obj in serializers.deserialize("json", dumped):  # loaddata's path
        obj.save(using=alias)
    loaded = Order.objects.using(alias).get(pk=order.pk)
    assert (loaded.status, loaded.status_version, loaded.total) == ("paid", 1, 5)


def test_a_stale_save_never_moves_the_projection(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create(total=1)
    stale = Order.objects.using(alias).get(pk=order.pk)
    order.status.send("PAY_ANYWAY")
    stale.total = 2
    stale.save()  # writes total; the state columns keep what the database has
    assert row_in_db(Order, order.pk, alias) == ("paid", 1)
    assert Order.objects.using(alias).get(pk=order.pk).total == 2


def test_open_sends_several_events_in_one_commit(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    with order.status.open(actor="alice") as block:
        block.send("ADD")
        block.send("PAY_ANYWAY")
        assert row_in_db(Order, order.pk, alias) == ("cart", 0)  # nothing before the commit
    assert order.status == "paid" and order.status_version == 1
    assert [r.version for r in order.status.history()] == [1, 1]


def test_an_idempotency_key_is_applied_once(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    assert order.status.send("ADD", idempotency_key="evt_1").accepted
    again = order.status.send("ADD", idempotency_key="evt_1")
    assert isinstance(again, ReplayedReceipt) and again.duplicate
    assert order.status.context == {"items": 1} and order.status_version == 1


def test_an_unsaved_row_is_refused_before_any_redis_io(backend: Any) -> None:
    order = Order()
    with pytest.raises(UnsavedInstanceError) as err:
        order.status.send("ADD")
    assert "save the row first" in str(err.value)
    with pytest.raises(UnsavedInstanceError):
        order.status.context  # noqa: B018
    assert list(backend.store.list_keys("")) == []


def test_refused_events_follow_the_strict_rules(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    assert not order.status.send("SHIP").accepted
    with pytest.raises(EventNotAcceptedError):
        order.status.send("SHIP", strict=True)
    assert backend.store.load(order.status.key) is None  # refusals write nothing
    assert order.status_version == 0


def test_events_lists_what_the_state_accepts(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    events = order.status.events()
    assert events == ["ADD", "PAY", "PAY_ANYWAY"]
    assert [e.conditional for e in events] == [False, True, False]
    assert all(isinstance(e, AvailableEvent) for e in events)
    assert order.status.can("PAY", amount=10) and not order.status.can("PAY", amount=1)
    order.status.send("PAY_ANYWAY")
    assert order.status.events() == ["SHIP", "REFUND"]
    assert order.status.matches("paid") and order.status.matches("shop.paid")


def test_uuid_and_string_primary_keys_have_their_own_keys_and_logs(
    alias: str, backend: Any
) -> None:
    by_uuid = UuidOrder.objects.using(alias).create()
    by_slug = SlugOrder.objects.using(alias).create(slug="spring-sale")
    by_uuid.status.send("ADD")
    by_slug.status.send("ADD", actor="bob")
    assert by_uuid.status.key == f"uuid-order:{by_uuid.pk}"
    assert by_slug.status.key == "slug-order:spring-sale"
    assert [r.actor for r in by_slug.status.history()] == ["bob"]
    assert UuidOrder.objects.using(alias).get(pk=by_uuid.pk).status_version == 1


def test_async_twins_send_and_open(alias: str, backend: Any) -> None:
    # Driven from sync code, as Django runs an async view under a sync
    # server: the async ORM's thread-sensitive calls then run on this
    # thread, in the test's database connection and transaction.
    async_to_sync(_async_scenario)(alias)


async def _async_scenario(alias: str) -> None:
    order = await Order.objects.using(alias).acreate()
    assert (await order.status.asend("ADD")).accepted
    async with order.status.aopen(actor="eve") as block:
        await block.asend("PAY_ANYWAY")
    assert order.status == "paid" and order.status_version == 2
    fresh = await Order.objects.using(alias).aget(pk=order.pk)
    assert (fresh.status, fresh.status_version) == ("paid", 2)
    history = await sync_to_async(order.status.history)()
    assert [r.actor for r in history] == ["", "eve"]


def test_events_for_a_user_hide_what_needs_a_missing_permission(
    alias: str, backend: Any, django_user_model: Any
) -> None:
    from django.contrib.auth.models import Permission

    order = Order.objects.using(alias).create()
    order.status.send("PAY_ANYWAY")
    clerk = django_user_model.objects.create_user("clerk")
    assert order.status.events(user=clerk) == ["SHIP"]  # REFUND needs fieldapp.refund_order
    clerk.user_permissions.add(Permission.objects.get(codename="refund_order"))
    clerk = django_user_model.objects.get(pk=clerk.pk)  # permissions are cached per object
    assert order.status.events(user=clerk) == ["SHIP", "REFUND"]
    assert machines["shop"].permissions == {"REFUND": ("fieldapp.refund_order",)}
