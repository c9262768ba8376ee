"""xsm_sync_models (the reconciler), the field's system checks, and the
migrations the field produces."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import models, transaction
from django.db.migrations.state import ModelState, ProjectState
from django.test.utils import isolate_apps

from django_xsm.fields import StatechartField
from django_xsm.registry import machines
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order, TinyParcel

pytestmark = pytest.mark.django_db(databases=DB_ALIASES, transaction=True)


class _Rollback(Exception):
    pass


def _lagging(alias: str) -> Order:
    """A row whose send was rolled back after the Redis commit."""
    order = Order.objects.using(alias).create()
    with pytest.raises(_Rollback), transaction.atomic(using=alias):
        order.status.send("PAY_ANYWAY")
        raise _Rollback
    return order


def sync(*args: str) -> str:
    out = io.StringIO()
    call_command("xsm_sync_models", *args, stdout=out)
    return out.getvalue()


def test_sync_repairs_lagging_rows_and_reports_orphans(alias: str, backend: Any) -> None:
    lagging = _lagging(alias)
    fine = Order.objects.using(alias).create()
    fine.status.send("ADD")
    orphan = machines["shop"].objects
    with orphan.open("shop:999999", actor="x") as block:
        block.send("ADD")
    out = sync("--model", "fieldapp.Order", "--database", alias, "--dry-run", "-v", "2")
    assert "fieldapp.Order.status: 2 row(s), would repair 1, 0 missing, 1 orphan(s)" in out
    assert "orphan: shop:999999" in out and "dry run" in out
    assert row_in_db(Order, lagging.pk, alias) == ("cart", 1)  # dry run: unchanged
    out = sync("--model", "fieldapp.Order", "--database", alias)
    assert "repaired 1" in out
    assert row_in_db(Order, lagging.pk, alias) == ("paid", 2)  # created (v1), then sent
    assert row_in_db(Order, fine.pk, alias) == ("cart", 2)
    out = sync("--model", "fieldapp.Order", "--database", alias, "--forget-orphans")
    assert "1 orphan(s) kept" in out and orphan.exists("shop:999999")  # too recent (300 s)
    out = sync(
        "--model",
        "fieldapp.Order",
        "--database",
        alias,
        "--forget-orphans",
        "--orphan-min-age",
        "0",
    )
    assert "repaired 0" in out and "1 orphan(s) forgotten" in out
    assert not orphan.exists("shop:999999")
    assert orphan.exists(lagging.status.key)  # a row's instance is never an orphan


def test_sync_check_exits_3_when_anything_lags(alias: str, backend: Any) -> None:
    _lagging(alias)
    with pytest.raises(CommandError, match="lagged") as raised:
        sync("--model", "fieldapp.Order", "--database", alias, "--dry-run", "--check")
    assert raised.value.returncode == 3  # a finding, not a failure (1)
    sync("--model", "fieldapp.Order", "--database", alias)
    sync("--model", "fieldapp.Order", "--database", alias, "--check")  # clean now: exit 0


def test_sync_reports_rows_whose_instance_redis_lost(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    order.status.send("ADD")
    backend.store.forget(order.status.key)  # as after a Redis restart without persistence
    out = sync("--model", "fieldapp.Order", "--database", alias, "-v", "2")
    assert "1 missing" in out and f"missing in Redis: {order.status.key}" in out


def test_sync_refuses_an_unknown_model_clearly(backend: Any) -> None:
    with pytest.raises(CommandError, match=r"app_label\.ModelName"):
        sync("--model", "nope.Nothing")


def test_sync_is_a_clear_error_when_redis_is_down(alias: str, xsm: Any) -> None:
    Order.objects.using(alias).create()
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, REDIS_OPTIONS={"socket_timeout": 0.5})
    with pytest.raises(CommandError, match="server is up"):
        sync("--model", "fieldapp.Order", "--database", alias)


# --- system checks -----------------------------------------------------------------


@isolate_apps("tests.fieldapp")
def test_an_unknown_machine_is_a_check_error_naming_model_and_field() -> None:
    class Ghost(models.Model):
        status = StatechartField(machine="nope")

        class Meta:
            app_label = "fieldapp"

    [error] = Ghost._meta.get_field("status").check()
    assert error.id == "xsm.E101"
    assert "fieldapp.Ghost.status names machine 'nope'" in error.msg
    assert "shop" in error.hint


def test_a_machine_that_failed_to_load_is_a_check_error_saying_why(xsm: Any) -> None:
    xsm(MACHINES={"shop": "tests.fieldapp.nowhere.machine"})
    field = Order._meta.get_field("status")
    [error] = [e for e in field.check() if e.id == "xsm.E101"]
    assert "fieldapp.Order.status names machine 'shop', which failed to load" in error.msg
    assert "No module named 'tests.fieldapp.nowhere'" in error.msg
    assert "not registered" not in error.msg
    assert "dotted path" in error.hint


def test_field_checks_step_aside_when_the_settings_are_invalid(xsm: Any) -> None:
    """xsm.E001 lists the settings problems once; the field's checks must
    neither raise (every command would crash) nor repeat them."""
    xsm(LOCK_TIMEOUT_S="nope")
    assert Order._meta.get_field("status").check() == []
    xsm(LOCK_TIMEOUT_S=1, MACHINES="nope")
    assert TinyParcel._meta.get_field("state").check() == []


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("ghost:{slug}", "names ['slug']"),
        ("ghost", "has no placeholder"),
        ("ghost:{0}", "placeholders"),
        ("ghost:{pk", "not a valid template"),
    ],
)
def test_a_key_template_that_cannot_resolve_is_a_check_error(template: str, problem: str) -> None:
    with isolate_apps("tests.fieldapp"):

        class Ghost(models.Model):
            status = StatechartField(machine="shop", key=template)

            class Meta:
                app_label = "fieldapp"

        [error] = Ghost._meta.get_field("status").check()
    assert error.id == "xsm.E102" and problem in error.msg


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs machine="),
        ({"machine": "shop", "key": ""}, "non-empty template"),
        ({"machine": "shop", "on_delete": "cascade"}, "must be one of"),
    ],
)
def test_bad_field_arguments_fail_at_class_definition(kwargs: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        StatechartField(**kwargs)


def test_the_installed_test_models_pass_the_checks() -> None:
    for model in apps.get_app_config("fieldapp").get_models():
        if model.__name__ == "TinyParcel":
            continue  # too short on purpose (xsm.W101: tests/django/fields/test_edges.py)
        for field in model._meta.local_fields:
            assert field.check() == [], (model, field)


# --- migrations ---------------------------------------------------------------------


def test_makemigrations_writes_both_columns_as_ordinary_fields() -> None:
    out = io.StringIO()
    call_command("makemigrations", "fieldapp", "--dry-run", "-v", "3", stdout=out)
    text = out.getvalue()
    assert "('status', django_xsm.fields.StatechartField(machine='shop'))" in text
    assert "key='uuid-order:{pk}', machine='shop'" in text and "on_delete='keep'" in text
    assert text.count("('status_version', django_xsm.fields.StatechartVersionField())") == 4
    assert "('state_version', django_xsm.fields.StatechartVersionField())" in text


def test_a_model_rebuilt_from_migration_state_has_one_version_column() -> None:
    state = ProjectState()
    state.add_model(ModelState.from_model(Order))
    rebuilt = state.apps.get_model("fieldapp", "Order")
    names = [f.name for f in rebuilt._meta.local_fields]
    assert names.count("status_version") == 1 and "status" in names
    _name, path, _args, kwargs = rebuilt._meta.get_field("status").deconstruct()
    assert (path, kwargs) == ("django_xsm.fields.StatechartField", {"machine": "shop"})
