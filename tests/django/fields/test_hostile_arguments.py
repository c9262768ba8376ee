"""Arguments of the wrong type through the model field and the manager
(issue 21): each is the documented ``XsmError`` with a bounded message,
raised before any Redis I/O, never a raw ``TypeError``, Django's
``ImproperlyConfigured`` for a call argument, or a ``RecursionError`` /
``ValueError`` while the message is built. On SQLite and PostgreSQL,
fakeredis and live."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError, XsmError
from django_xsm.registry import machines
from tests.django.fields.conftest import DB_ALIASES
from tests.fieldapp.models import Order
from tests.support import RoundTrips

pytestmark = pytest.mark.django_db(databases=DB_ALIASES)


def deep_tuple(depth: int = 3000) -> Any:
    value: Any = ()
    for _ in range(depth):
        value = (value,)
    return value


HUGE = 10**5000


@pytest.mark.parametrize(
    "value", [HUGE, 5, ["cart"], b"cart", object()], ids=["huge", "int", "list", "bytes", "object"]
)
def test_an_orm_filter_on_the_field_takes_state_names_only(alias: str, value: Any) -> None:
    """(A tuple nested 3000 deep never reaches the field: Django's own
    lookup resolution recurses into it first, for every field.)"""
    with pytest.raises(ArgumentTypeError) as err:
        list(Order.objects.using(alias).filter(status=value))
    assert err.value.path == "Order.status" and len(str(err.value)) < 200
    with pytest.raises(ArgumentTypeError):
        list(Order.objects.using(alias).filter(status__in=["cart", value]))
    assert list(Order.objects.using(alias).filter(status__in=["cart", "paid"])) == []


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda row: row.status.history(after_seq="1"), "after_seq"),
        (lambda row: row.status.history(limit=deep_tuple()), "limit"),
        (lambda row: row.status.send("ADD", lock="nope"), "lock"),
        (lambda row: row.status.send("ADD", lock=deep_tuple()), "lock"),
        (lambda row: row.status.matches([]), "state_id"),  # a read: it loads first
        (lambda row: machines["shop"].objects.send(row.status.key, "ADD", lock="nope"), "lock"),
        (lambda row: machines["shop"].objects.history(row.status.key, after_seq=-1), "after_seq"),
        (lambda row: machines["shop"].objects.page(limit=HUGE), "limit"),
        (lambda row: list(machines["shop"].objects.keys("shop:\ud800")), "prefix"),
    ],
)
def test_wrong_arguments_are_xsm_errors_before_any_write(
    alias: str, backend: Any, round_trips: RoundTrips, call: Any, path: str
) -> None:
    row = Order.objects.using(alias).create(total=1)
    before = row.status.history()
    with round_trips as rt, pytest.raises(InvalidConfigError) as err:
        call(row)
    assert isinstance(err.value, XsmError)
    assert err.value.path == path and len(str(err.value)) < 300
    assert rt.count == 0 or path == "state_id"
    assert row.status.history() == before  # nothing was written


@pytest.mark.parametrize(
    "value", [deep_tuple(), HUGE, -HUGE, "x" * 10**5], ids=["deep", "huge", "neg", "long"]
)
def test_a_row_lookup_value_no_row_can_have_is_a_404_with_a_bounded_message(
    alias: str, value: Any
) -> None:
    """What a URL converter hands a model-bound view: the row is not found
    (404), and the message shows the value bounded."""
    from django_xsm.fields.row_lookup import RowBinding, RowNotFoundError

    with pytest.raises(RowNotFoundError) as err:
        RowBinding(Order).row({"pk": value})
    assert len(str(err.value)) < 300 and "No fieldapp.Order with pk=" in str(err.value)
