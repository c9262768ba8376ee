"""Edges of the model field found in review: keys that only look like a
row's, rows that did not come from a commit, a failing projection inside
the caller's transaction, reads that must not run actions, a rolled-back
move seen through the same object, and unsaved rows with their own keys."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.db import connections, transaction
from django.test import RequestFactory

from django_xsm.admin import StatechartAdminMixin
from django_xsm.exceptions import StateAssignmentError, UnsavedInstanceError
from django_xsm.fields.keys import row_lookup
from django_xsm.registry import machines
from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp import machines as chart_module
from tests.fieldapp.models import Order, Signup, TinyParcel, UuidOrder, VipOrder

pytestmark = pytest.mark.django_db(databases=DB_ALIASES)


class _Rollback(Exception):
    pass


@pytest.mark.parametrize("alias_key", ["shop:0{pk}", "shop: {pk}", "shop:+{pk}", "shop:{pk}_0"])
def test_a_key_that_only_looks_like_a_rows_never_moves_it(
    alias: str, backend: Any, alias_key: str
) -> None:
    order = Order.objects.using(alias).create()
    other = alias_key.format(pk=order.pk)
    machines["shop"].objects.send(other, "PAY_ANYWAY", create=True)
    assert row_in_db(Order, order.pk, alias) == ("cart", 0)
    assert row_lookup(Order._meta.get_field("status"), other) is None
    assert row_lookup(Order._meta.get_field("status"), f"shop:{order.pk}") == {"pk": order.pk}


def test_a_longer_template_on_the_same_machine_moves_its_own_rows(backend: Any) -> None:
    vip = VipOrder.objects.create()
    machines["shop"].objects.send(f"shop:vip:{vip.pk}", "PAY_ANYWAY", create=True)
    fresh = VipOrder.objects.get(pk=vip.pk)
    assert (fresh.tier, fresh.tier_version) == ("paid", 1)


def test_a_new_row_starts_at_the_initial_state_whatever_the_object_holds(
    alias: str, backend: Any
) -> None:
    order = Order.objects.using(alias).create()
    order.status.send("PAY_ANYWAY")
    order.pk = None
    order._state.adding = True
    order.save(using=alias)  # a clone of a paid row
    assert row_in_db(Order, order.pk, alias) == ("cart", 0)
    assert (order.status, order.status_version) == ("cart", 0)
    made = Order.objects.using(alias).create(status="refunded", status_version=10**6)
    assert row_in_db(Order, made.pk, alias) == ("cart", 0)


def test_another_rows_state_cannot_be_assigned(alias: str, backend: Any) -> None:
    paid, fresh = Order.objects.using(alias).create(), Order.objects.using(alias).create()
    paid.status.send("PAY_ANYWAY")
    with pytest.raises(StateAssignmentError):
        fresh.status = paid.status
    assert fresh.status == "cart"


def test_reads_of_a_row_without_a_commit_run_no_action(backend: Any) -> None:
    chart_module.WELCOMES.clear()
    row = Signup.objects.create()
    assert row.step == "welcome"
    status = row.step
    assert status.value == "welcome" and status.can("DONE") and not status.matches("active")
    assert row.step.events() == ["DONE"] and row.step.context == {}
    assert chart_module.WELCOMES == []  # five reads, no welcome mail
    row.step.send("DONE")  # the first real open runs it, once
    assert chart_module.WELCOMES == ["sent"]


def test_a_move_rolled_back_is_repaired_through_the_same_object(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    with pytest.raises(_Rollback), transaction.atomic(using=alias):
        order.status.send("PAY_ANYWAY")
        raise _Rollback
    assert row_in_db(Order, order.pk, alias) == ("cart", 0)
    assert order.status.value == "paid"  # the same object: it still repairs the row
    assert row_in_db(Order, order.pk, alias) == ("paid", 1)


def test_a_row_not_saved_yet_has_no_key_even_with_its_own_pk(backend: Any) -> None:
    with pytest.raises(UnsavedInstanceError, match="not saved yet"):
        UuidOrder().status.send("ADD")
    assert list(backend.store.list_keys("")) == []


def test_a_projection_that_fails_leaves_the_callers_transaction_usable(backend: Any) -> None:
    if "postgres" not in connections:
        pytest.skip("SQLite does not enforce max_length")
    row = TinyParcel.objects.using("postgres").create()
    with transaction.atomic(using="postgres"):
        row.state.send("PACKED")  # "shipping.picked": 15 characters, the column holds 12
        assert TinyParcel.objects.using("postgres").filter(pk=row.pk).exists()  # still usable
    assert TinyParcel.objects.using("postgres").get(pk=row.pk).state_version == 0  # lags
    assert backend.store.load(row.state.key).version == 1  # Redis committed


def test_a_column_too_short_for_the_chart_is_a_check_warning() -> None:
    [warning] = TinyParcel._meta.get_field("state").check()
    assert warning.id == "xsm.W101" and "up to 46 characters" in warning.msg


def test_the_admin_mixin_takes_list_form_filters(backend: Any) -> None:
    class OrderAdmin(StatechartAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
        list_filter = [["total", admin.AllValuesFieldListFilter], "status"]

    found = OrderAdmin(Order, admin.site).get_list_filter(RequestFactory().get("/"))
    assert found[0] == ["total", admin.AllValuesFieldListFilter]
    assert found[1][0] == "status"


def test_assigning_a_huge_value_is_still_the_clear_error(backend: Any) -> None:
    """The message prints a bounded form: a 5 000-digit int (whose repr()
    raises ValueError) must not turn the refusal into another error."""
    order = Order.objects.create()
    with pytest.raises(StateAssignmentError) as err:
        order.status = 10**5000
    assert "<int of about" in str(err.value) and len(str(err.value)) < 300
