"""A speculative block on a model row (``order.status.open(speculative=True)``):
warm after the row's own commit, and a duplicate found only at commit never
moves the row's projection (its state was never stored). SQLite and
PostgreSQL, fakeredis and a live Redis."""

from __future__ import annotations

from typing import Any

import pytest

from tests.django.fields.conftest import DB_ALIASES
from tests.django.fields.test_field import row_in_db
from tests.fieldapp.models import Order

pytestmark = pytest.mark.django_db(databases=DB_ALIASES)


def _add(order: Order, key: str) -> Any:
    with order.status.open(speculative=True, idempotency_key=key) as block:
        block.send("ADD")
    return block


def test_a_row_commits_warm_and_its_projection_follows(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    assert not _add(order, "k1").warm
    block = _add(order, "k2")
    assert block.warm and block.committed is not None
    assert order.status.context == {"items": 2} and order.status_version == 2
    assert row_in_db(Order, order.pk, alias) == ("cart", 2)


def test_a_duplicate_found_at_commit_leaves_the_row_alone(alias: str, backend: Any) -> None:
    order = Order.objects.using(alias).create()
    _add(order, "k1")
    _add(order, "k2")
    again = _add(order, "k1")  # a retry of k1, on a warm key: found at commit
    assert again.warm and again.replayed_at_close
    assert row_in_db(Order, order.pk, alias) == ("cart", 2)
    assert order.status.context == {"items": 2} and order.status_version == 2
