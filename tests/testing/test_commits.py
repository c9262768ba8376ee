"""On-commit callbacks under the ``xsm`` helper run as in production, inside
the test's transaction that never commits: at once outside the code's own
``atomic()``, when the code's outermost block commits, never when it rolls
back. ``post_transition`` receivers and a new row's statechart (the model
field creates it on commit) show it, on SQLite and on PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections, transaction

from django_xsm.registry import machines
from django_xsm.signals import post_transition
from django_xsm.testing import Xsm
from tests.django.fields.conftest import DB_ALIASES, alias  # noqa: F401  (a fixture)
from tests.fieldapp.models import Order

pytestmark = pytest.mark.django_db(databases=DB_ALIASES)


@pytest.fixture
def received() -> Iterator[list[str]]:
    got: list[str] = []

    def receiver(sender: Any, *, key: str, event: str, **kwargs: Any) -> None:
        got.append(f"{key} {event}")

    post_transition.connect(receiver, dispatch_uid="testing-commits", weak=False)
    try:
        yield got
    finally:
        post_transition.disconnect(dispatch_uid="testing-commits")


def bump(key: str = "t:1") -> None:
    machines["ticket"].objects.send(key, "BUMP", create=True)


def test_outside_the_codes_transactions_receivers_run_at_once(
    helper: Xsm, received: list[str]
) -> None:
    assert connections["default"].in_atomic_block  # the test's transaction
    bump()
    assert received == ["t:1 BUMP"]


def test_inside_the_codes_atomic_they_wait_for_its_commit(helper: Xsm, received: list[str]) -> None:
    with transaction.atomic():
        bump()
        with transaction.atomic():
            bump("t:2")
        assert received == []  # the outer block has not committed yet
    assert received == ["t:1 BUMP", "t:2 BUMP"]


def test_a_rolled_back_block_runs_none_of_its_callbacks(helper: Xsm, received: list[str]) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        bump()
        raise RuntimeError("rolled back")
    with transaction.atomic():
        try:
            with transaction.atomic():
                bump("t:2")
                raise RuntimeError("the inner block rolls back")
        except RuntimeError:
            pass
        bump("t:3")
    assert received == ["t:3 BUMP"]


def test_callbacks_queued_before_the_helper_and_after_it_are_djangos(
    project: Any, received: list[str]
) -> None:
    ran: list[str] = []
    transaction.on_commit(lambda: ran.append("before"))
    with Xsm():
        bump()
        transaction.on_commit(lambda: ran.append("during"))
    transaction.on_commit(lambda: ran.append("after"))
    assert ran == ["during"]
    assert received == ["t:1 BUMP"]
    queued = [entry[1] for entry in connections["default"].run_on_commit]
    assert len(queued) == 2  # "before" and "after": for the test's commit that never comes
    assert "on_commit" not in vars(connections["default"])  # the connection is as it was


def test_a_robust_callback_that_raises_is_logged_a_plain_one_raises(
    helper: Xsm, caplog: pytest.LogCaptureFixture
) -> None:
    def boom() -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="django.db.backends.base"):
        transaction.on_commit(boom, robust=True)
    assert "Error calling" in caplog.text and "boom" in caplog.text
    with pytest.raises(ValueError, match="boom"):
        transaction.on_commit(boom)


def test_a_new_rows_statechart_is_created_as_its_insert_commits(
    helper: Xsm,
    alias: str,  # noqa: F811
) -> None:
    shop = machines["shop"].objects
    first = Order.objects.using(alias).create()
    assert shop.get(first.status.key).value == "cart"
    with transaction.atomic(using=alias):
        second = Order.objects.using(alias).create()
        assert not shop.exists(second.status.key)
    assert shop.exists(second.status.key)
    with pytest.raises(RuntimeError), transaction.atomic(using=alias):
        third = Order.objects.using(alias).create()
        raise RuntimeError("rolled back")
    assert not shop.exists(f"shop:{third.pk}")


@pytest.mark.django_db(transaction=True)
def test_with_real_commits_django_runs_them_once(project: Any, received: list[str]) -> None:
    with Xsm():
        assert not connections["default"].in_atomic_block
        bump()
        with transaction.atomic():
            bump("t:2")
    assert received == ["t:1 BUMP", "t:2 BUMP"]
