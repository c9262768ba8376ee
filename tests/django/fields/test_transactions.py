"""The projection and the caller's database transaction: it moves forward
only, signals fire only once the transaction commits, a rolled-back row
converges, and deleting a row forgets its statechart after the commit."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext

from django_xsm.fields.projection import advance_row
from django_xsm.registry import machines
from django_xsm.signals import post_commit, post_transition
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order, SlugOrder

# Real commits (TransactionTestCase style): on_commit callbacks only run
# when the outermost transaction commits, which a test transaction never does.
pytestmark = pytest.mark.django_db(databases=DB_ALIASES, transaction=True)


class _Heard:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []

    def __call__(self, sender: Any, **kw: Any) -> None:
        self.events.append((kw["key"], kw["event"], kw["version"]))


@pytest.fixture
def heard() -> Any:
    receiver = _Heard()
    post_transition.connect(receiver, weak=False)
    yield receiver
    post_transition.disconnect(receiver)


class _Rollback(Exception):
    pass


def test_the_projection_only_moves_forward_whatever_the_order(alias: str) -> None:
    order = Order.objects.using(alias).create()
    columns = {"state_column": "status", "version_column": "status_version", "using": alias}
    assert advance_row(Order, order.pk, state="shipped", version=3, **columns)
    # a slower worker's older update lands afterwards: it changes nothing
    assert not advance_row(Order, order.pk, state="paid", version=2, **columns)
    assert not advance_row(Order, order.pk, state="paid", version=3, **columns)
    assert row_in_db(Order, order.pk, alias) == ("shipped", 3)


def test_a_rolled_back_transaction_fires_nothing_and_leaves_no_row(
    alias: str, backend: Any, heard: Any
) -> None:
    with pytest.raises(_Rollback), transaction.atomic(using=alias):
        order = Order.objects.using(alias).create()
        order.status.send("ADD")
        order.status.send("PAY_ANYWAY")
        assert heard.events == []  # not before the transaction commits
        raise _Rollback
    assert not Order.objects.using(alias).filter(pk=order.pk).exists()
    assert heard.events == []
    # Redis is the source of truth: the commit stands, as an orphan row-less
    # instance that xsm_sync_models reports.
    assert backend.store.load(f"shop:{order.pk}").version == 2


def test_signals_fire_after_the_commit_in_order(alias: str, backend: Any, heard: Any) -> None:
    with transaction.atomic(using=alias):
        order = Order.objects.using(alias).create()
        order.status.send("ADD")
        order.status.send("PAY_ANYWAY")
        assert heard.events == []
    key = f"shop:{order.pk}"
    assert heard.events == [(key, "ADD", 1), (key, "PAY_ANYWAY", 2)]
    order.status.send("SHIP")  # outside a transaction: right after the commit
    assert heard.events[-1] == (key, "SHIP", 3)


def test_a_row_rolled_back_behind_redis_converges_on_the_next_read(
    alias: str, backend: Any
) -> None:
    order = Order.objects.using(alias).create()  # its instance is created: v1
    with pytest.raises(_Rollback), transaction.atomic(using=alias):
        order.status.send("PAY_ANYWAY")
        raise _Rollback
    assert row_in_db(Order, order.pk, alias) == ("cart", 1)  # the row lags Redis
    lagging = Order.objects.using(alias).get(pk=order.pk)
    assert lagging.status == "cart"  # the column, no I/O
    assert lagging.status.value == "paid"  # a read loads Redis and repairs the row
    assert row_in_db(Order, order.pk, alias) == ("paid", 2)
    assert lagging.status == "paid" and lagging.status_version == 2


def test_a_send_on_a_lagging_row_repairs_it_too(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    with pytest.raises(_Rollback), transaction.atomic(using=alias):
        order.status.send("PAY_ANYWAY")
        raise _Rollback
    lagging = Order.objects.using(alias).get(pk=order.pk)
    assert not lagging.status.send("PAY_ANYWAY").accepted  # Redis says: paid already
    assert row_in_db(Order, order.pk, alias) == ("paid", 2)


def test_deleting_a_row_forgets_its_statechart_once_the_delete_commits(
    alias: str, backend: Any
) -> None:
    order = Order.objects.using(alias).create()
    order.status.send("ADD")
    key = order.status.key
    with pytest.raises(_Rollback), transaction.atomic(using=alias):
        Order.objects.using(alias).filter(pk=order.pk).delete()
        raise _Rollback
    assert machines["shop"].objects.exists(key)  # a rolled-back delete erases nothing
    order.delete()
    assert not machines["shop"].objects.exists(key)
    assert machines["shop"].objects.history(key) == []


def test_on_delete_keep_leaves_the_statechart(alias: str, backend: Any) -> None:
    row = SlugOrder.objects.using(alias).create(slug="kept")
    row.status.send("ADD")
    row.delete()
    assert machines["shop"].objects.exists("slug-order:kept")


def test_commits_made_outside_the_field_move_the_row_too(alias: str, backend: Any) -> None:
    """The timer scanner, the admin and objects.send() commit without the
    row at hand: the key ("shop:<pk>") names the row, so it moves as well,
    inside the caller's transaction."""
    order = Order.objects.using(alias).create()
    key = order.status.key
    machines["shop"].objects.send(key, "PAY_ANYWAY")  # the row's creation made v1
    if alias == "default":
        assert row_in_db(Order, order.pk, alias) == ("paid", 2)
    with pytest.raises(_Rollback), transaction.atomic():
        machines["shop"].objects.send(key, "SHIP")
        raise _Rollback
    # the default database's transaction rolled back the projection (its
    # row lags, as after any rollback, until a read or the reconciler)
    fresh = Order.objects.using(alias).get(pk=order.pk)
    assert fresh.status.value == "shipped" and fresh.status_version == 3


class _SeenAtPostCommit:
    """A ``post_commit`` receiver that reads the row with SQL when called."""

    def __init__(self, alias: str, pk: Any) -> None:
        self.alias, self.pk = alias, pk
        self.rows: list[tuple[int, tuple[str, int]]] = []

    def __call__(self, sender: Any, **kw: Any) -> None:
        self.rows.append((kw["version"], row_in_db(Order, self.pk, self.alias)))


def test_the_row_is_written_by_its_block_before_post_commit(alias: str, backend: Any) -> None:
    """The projection is the block's own writer, not a post_commit receiver:
    the package connects none, and the public signal still comes once per
    commit, when the row has moved already; one UPDATE of the row per
    commit."""
    assert not post_commit.has_listeners()
    order = Order.objects.using(alias).create()  # its instance is created: v1
    seen = _SeenAtPostCommit(alias, order.pk)
    post_commit.connect(seen, weak=False)
    try:
        with CaptureQueriesContext(connections[alias]) as queries:
            order.status.send("ADD")
        with order.status.open() as block:
            block.send("PAY_ANYWAY")
            block.send("SHIP")
    finally:
        post_commit.disconnect(seen)
    assert seen.rows == [(2, ("cart", 2)), (3, ("shipped", 3))]
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 1 and Order._meta.db_table in updates[0]
    assert order.status == "shipped" and order.status_version == 3  # the row object too


def test_an_async_block_writes_its_row_before_post_commit(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    seen = _SeenAtPostCommit(alias, order.pk)

    async def send() -> None:
        await order.status.asend("ADD")

    post_commit.connect(seen, weak=False)
    try:
        async_to_sync(send)()
    finally:
        post_commit.disconnect(seen)
    assert seen.rows == [(2, ("cart", 2))]
    assert order.status == "cart" and order.status_version == 2


def test_an_async_block_opened_without_the_row_moves_it_too(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    key = order.status.key

    async def send() -> None:
        async with machines["shop"].objects.aopen(key) as block:
            await block.asend("PAY_ANYWAY")

    async_to_sync(send)()
    if alias == "default":  # the router sends the row's UPDATE to the default database
        assert row_in_db(Order, order.pk, alias) == ("paid", 2)
    else:
        assert row_in_db(Order, order.pk, alias) == ("cart", 1)
