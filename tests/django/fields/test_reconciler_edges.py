"""Edges of the reconciler (xsm_sync_models) and of the on-delete forget:
races with rows created during a pass, a row re-created in the deleting
transaction, rows without a key, failing UPDATEs, routed databases, rows
ahead of Redis, exit statuses and proxy models."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError, connection, connections, models, transaction
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual
from django.test.utils import CaptureQueriesContext, isolate_apps

from django_xsm.fields import StatechartField, sync
from django_xsm.fields.lifecycle import forget_on_delete
from django_xsm.management.commands import xsm_sync_models
from django_xsm.registry import machines
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order, SlugOrder, UuidOrder

pytestmark = pytest.mark.django_db(databases=DB_ALIASES, transaction=True)


def sync_cmd(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("xsm_sync_models", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _orphan(key: str) -> None:
    with machines["shop"].objects.open(key, actor="x") as block:
        block.send("ADD")


# --- A: --forget-orphans races with rows created during the pass --------------------


def test_a_row_created_and_sent_to_during_the_pass_is_not_forgotten(
    alias: str, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sync._claimed_by_other_fields
    created: list[Order] = []

    def during_pass(f: Any, using: str) -> set[str]:  # after the walk, before the orphan step
        if f.model is Order and not created:
            row = Order.objects.using(alias).create()
            row.status.send("PAY_ANYWAY")
            created.append(row)
        return real(f, using)

    _orphan("shop:999999")  # so that the orphan step runs
    monkeypatch.setattr(sync, "_claimed_by_other_fields", during_pass)
    args = ("--model", "fieldapp.Order", "--database", alias)
    sync_cmd(*args, "--forget-orphans", "--orphan-min-age", "0")
    [row] = created
    assert machines["shop"].objects.get(row.status.key).version == 2  # still there
    assert not machines["shop"].objects.exists("shop:999999")  # the real orphan is gone


def test_an_orphan_whose_row_appears_before_the_forget_is_kept(
    alias: str, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _orphan("slug-order:late")
    real = sync._claimed_by_other_fields

    def during_pass(f: Any, using: str) -> set[str]:
        if f.model is SlugOrder:
            SlugOrder.objects.using(alias).get_or_create(slug="late")
        return real(f, using)

    monkeypatch.setattr(sync, "_claimed_by_other_fields", during_pass)
    report = sync.sync_field(SlugOrder._meta.get_field("status"), forget_orphans=True, using=alias)
    assert report.orphans == ["slug-order:late"] and report.kept == ["slug-order:late"]
    assert report.forgotten == 0 and machines["shop"].objects.exists("slug-order:late")


def test_an_orphan_sent_to_before_the_forget_is_kept(
    alias: str, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _orphan("shop:999998")
    real = sync._claimed_now

    def meanwhile(f: Any, keys: list[str], using: str) -> set[str]:
        machines["shop"].objects.send("shop:999998", "ADD", actor="other-worker")
        return real(f, keys, using)

    monkeypatch.setattr(sync, "_claimed_now", meanwhile)
    report = sync.sync_field(Order._meta.get_field("status"), forget_orphans=True, using=alias)
    assert report.kept == ["shop:999998"] and report.forgotten == 0
    assert machines["shop"].objects.get("shop:999998").version == 2


def test_forget_orphans_leaves_recent_instances_by_default(alias: str, backend: Any) -> None:
    _orphan("shop:999997")  # a row whose transaction has not committed looks like this
    out, _ = sync_cmd("--model", "fieldapp.Order", "--database", alias, "--forget-orphans")
    assert "1 orphan(s) kept" in out and machines["shop"].objects.exists("shop:999997")


# --- B: the on-delete forget is fenced by the version read at delete time ------------


def test_a_row_recreated_with_the_same_key_in_the_deleting_transaction_keeps_its_chart(
    alias: str, backend: Any
) -> None:
    old = Order.objects.using(alias).create()
    old.status.send("ADD")
    pk = old.pk
    with transaction.atomic(using=alias):
        old.delete()
        new = Order.objects.using(alias).create(pk=pk)
        new.status.send("PAY_ANYWAY")
    view = machines["shop"].objects.get(f"shop:{pk}")
    assert view.value == "paid" and view.version == 3  # created, ADD, then the new row's send
    assert row_in_db(Order, pk, alias) == ("paid", 3)


def test_a_plain_delete_still_forgets(alias: str, backend: Any) -> None:
    row = Order.objects.using(alias).create()
    row.status.send("ADD")
    row.delete()
    assert not machines["shop"].objects.exists(f"shop:{row.pk}")


def test_a_delete_while_redis_is_down_warns_and_deletes(
    alias: str, xsm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = Order.objects.using(alias).create()
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, REDIS_OPTIONS={"socket_timeout": 0.5})
    with caplog.at_level(logging.WARNING, logger="django_xsm.fields"):
        row.delete()
    assert not Order.objects.using(alias).filter(pk=row.pk).exists()
    assert "could not forget 'shop:" in caplog.text and "--forget-orphans" in caplog.text


# --- C: rows without a usable key ----------------------------------------------------


def test_rows_without_a_usable_key_are_reported_and_the_pass_goes_on(
    alias: str, backend: Any
) -> None:
    SlugOrder.objects.using(alias).create(slug="")
    SlugOrder.objects.using(alias).create(slug="bad\x07key")
    fine = SlugOrder.objects.using(alias).create(slug="fine")
    with pytest.raises(ZeroDivisionError), transaction.atomic(using=alias):
        fine.status.send("PAY_ANYWAY")  # Redis commits, the row rolls back: it lags
        raise ZeroDivisionError
    out, _ = sync_cmd("--model", "fieldapp.SlugOrder", "--database", alias, "-v", "2")
    assert "3 row(s), repaired 1" in out and "2 unkeyed" in out
    assert "unkeyed: pk=''" in out and "unkeyed: pk='bad\\x07key'" in out
    assert SlugOrder.objects.using(alias).get(slug="fine").status == "paid"


def test_deleting_a_row_without_a_key_is_quiet(alias: str, backend: Any) -> None:
    receiver = forget_on_delete(SlugOrder._meta.get_field("status"))
    for slug in ("", "bad\x07key"):
        row = SlugOrder.objects.using(alias).create(slug=slug)
        receiver(sender=SlugOrder, instance=row, using=alias)  # raises nothing


# --- D: one failing UPDATE fails that row only ---------------------------------------


@pytest.fixture
def tiny(alias: str) -> Any:
    """A model whose state column refuses states longer than 16 characters."""
    with isolate_apps("tests.fieldapp"):

        class Tiny(models.Model):
            state = StatechartField(machine="parcel", key="tiny:{pk}")

            class Meta:
                app_label = "fieldapp"
                constraints = [
                    models.CheckConstraint(
                        condition=LessThanOrEqual(Length("state"), 16), name="tiny_short_state"
                    )
                ]

    with connections[alias].schema_editor() as editor:
        editor.create_model(Tiny)
    yield Tiny
    with connections[alias].schema_editor() as editor:
        editor.delete_model(Tiny)


def _tiny_rows(tiny: Any, alias: str) -> tuple[Any, Any]:
    parcel = machines["parcel"].objects
    long, short = tiny.objects.using(alias).create(), tiny.objects.using(alias).create()
    parcel.send(f"tiny:{long.pk}", "PACKED", create=True)
    parcel.send(f"tiny:{long.pk}", "SPLIT")  # "tracking.road.moving,...": 44 characters
    parcel.send(f"tiny:{short.pk}", "PACKED", create=True)  # "shipping.picked": fits
    return long, short


def test_a_failing_update_fails_its_row_only_even_inside_a_transaction(
    alias: str, backend: Any, tiny: Any
) -> None:
    long, short = _tiny_rows(tiny, alias)
    with transaction.atomic(using=alias):  # PostgreSQL: no aborted transaction after it
        report = sync.sync_field(tiny._meta.get_field("state"), using=alias)
        assert tiny.objects.using(alias).count() == 2
    assert [key for key, _ in report.failed] == [f"tiny:{long.pk}"]
    assert "IntegrityError" in report.failed[0][1] and report.repaired == 1
    assert tiny.objects.using(alias).get(pk=short.pk).state == "shipping.picked"


def test_the_command_reports_failed_rows_syncs_the_rest_and_exits_1(
    alias: str, backend: Any, tiny: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    long, _ = _tiny_rows(tiny, alias)
    order = Order.objects.using(alias).create()
    machines["shop"].objects.send(order.status.key, "PAY_ANYWAY")  # v2: v1 was its creation
    Order.objects.using(alias).filter(pk=order.pk).update(status="cart", status_version=1)
    fields = [tiny._meta.get_field("state"), Order._meta.get_field("status")]
    monkeypatch.setattr(xsm_sync_models, "statechart_fields", lambda labels: fields)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="could not be synced") as raised:
        call_command("xsm_sync_models", "--database", alias, stdout=out, stderr=err)
    assert raised.value.returncode == 1
    assert "1 failed" in out.getvalue() and f"failed: tiny:{long.pk}: IntegrityError" in (
        err.getvalue()
    )
    assert row_in_db(Order, order.pk, alias) == ("paid", 2)  # the next model still ran


def test_a_database_error_reading_a_model_is_a_command_error(
    alias: str, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("no such table: fieldapp_order")

    monkeypatch.setattr(xsm_sync_models, "sync_field", broken)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command(
            "xsm_sync_models", "--model", "fieldapp.Order", "--database", alias,
            stdout=out, stderr=err,
        )  # fmt: skip
    assert raised.value.returncode == 1
    assert "fieldapp.Order.status: database error (OperationalError: no such table" in (
        err.getvalue()
    )


# --- E: the orphan pass reads other models from their own database -------------------


class _UuidOrdersElsewhere:
    """UuidOrder lives in 'default'; everything else where it is asked for."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return "default" if model is UuidOrder else None

    db_for_write = db_for_read


def test_the_orphan_pass_reads_other_models_through_the_router(backend: Any, settings: Any) -> None:
    if "postgres" not in connections.databases:
        pytest.skip("needs a second database (PostgreSQL)")
    settings.DATABASE_ROUTERS = [f"{__name__}._UuidOrdersElsewhere"]
    _orphan("shop:999996")  # the orphan step runs, and reads the other shop models
    table = UuidOrder._meta.db_table
    with (
        CaptureQueriesContext(connections["postgres"]) as pg,
        CaptureQueriesContext(connection) as default,
    ):
        sync_cmd("--model", "fieldapp.Order", "--database", "postgres")
    assert not [q for q in pg.captured_queries if table in q["sql"]]
    assert [q for q in default.captured_queries if table in q["sql"]]


# --- F: rows ahead of Redis ------------------------------------------------------------


def test_rows_ahead_of_redis_are_reported_and_fail_the_check(alias: str, backend: Any) -> None:
    row = Order.objects.using(alias).create()
    row.status.send("ADD")  # Redis v1
    # A row copied from elsewhere, or a Redis restored from an older backup:
    Order.objects.using(alias).filter(pk=row.pk).update(status_version=50)
    args = ("--model", "fieldapp.Order", "--database", alias)
    out, _ = sync_cmd(*args, "-v", "2")
    assert "1 ahead of Redis" in out and f"ahead of Redis: {row.status.key}" in out
    with pytest.raises(CommandError, match="ahead") as raised:
        sync_cmd(*args, "--check", "--dry-run")
    assert raised.value.returncode == 3
    assert row_in_db(Order, row.pk, alias) == ("cart", 50)  # never moved backwards


# --- G: proxies ------------------------------------------------------------------------


def test_deleting_through_a_proxy_model_forgets(alias: str, backend: Any) -> None:
    with isolate_apps("tests.fieldapp"):

        class ProxyOrder(Order):
            class Meta:
                proxy = True
                app_label = "fieldapp"

    one, two = Order.objects.using(alias).create(), Order.objects.using(alias).create()
    one.status.send("ADD")
    two.status.send("ADD")
    ProxyOrder.objects.using(alias).get(pk=one.pk).delete()
    ProxyOrder.objects.using(alias).filter(pk=two.pk).delete()  # a queryset delete too
    assert not machines["shop"].objects.exists(one.status.key)
    assert not machines["shop"].objects.exists(two.status.key)
