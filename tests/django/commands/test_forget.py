"""xsm_forget: erases everything about one instance (record, deadlines,
lock, log, idempotency rows) and nothing else; asks on a terminal only."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from django.core.management.base import CommandError

from django_xsm import backend as stores
from django_xsm import operations
from django_xsm.registry import machines
from tests.django.commands.conftest import run


@pytest.fixture
def stored(backend: Any) -> str:
    objects = machines["alarm"].objects
    objects.send("alarm:1", "SNOOZE", create=True, idempotency_key="k1", principal="ann")
    objects.send("alarm:1", "SNOOZE", idempotency_key="k2")
    objects.send("alarm:1", "SNOOZE", actor="bob")
    # a neighbour whose key starts with the same characters keeps everything
    objects.send("alarm:10", "SNOOZE", create=True, idempotency_key="k1", principal="ann")
    return "alarm:1"


def rows(key: str) -> int:
    return stores.get_inbox().count_for_instance(key)


def test_yes_erases_everything_about_the_instance(stored: str):
    version = machines["alarm"].objects.get(stored).version
    assert rows(stored) == 2
    out = run("xsm_forget", stored, "--yes").out
    assert out == (
        "Forgot 'alarm:1': record 1, deadlines 1, lock 0, log records 3, idempotency rows 2\n"
    )
    objects = machines["alarm"].objects
    assert not objects.exists(stored)
    assert stores.get_log().read(stored) == [] and rows(stored) == 0
    assert stored not in [k for k, _ in stores.get_store().due_keys(2**40)]
    assert stored not in list(objects.keys("alarm:"))
    # the neighbour is untouched
    assert objects.exists("alarm:10") and rows("alarm:10") == 1
    assert len(stores.get_log().read("alarm:10")) == 1
    # only the version floor stays: a re-created instance continues above it
    objects.send(stored, "SNOOZE", create=True)
    assert objects.get(stored).version > version
    # the replayed key is gone with its row: it runs again
    receipt = objects.send(stored, "SNOOZE", idempotency_key="k2")
    assert not getattr(receipt, "duplicate", False)


def test_a_held_lock_is_erased_too(stored: str):
    with stores.get_store().lock(stored, ttl_ms=60_000):
        counts = operations.forget_instance(stored)
    assert counts["lock"] == 1
    assert stores.get_store().lock_holder(stored) is None


def test_a_log_without_a_record(stored: str):
    stores.get_store().delete(stored)
    out = run("xsm_forget", stored, "--no-input").out
    assert out.startswith("Forgot 'alarm:1': record 0, deadlines 0, lock 0, log records 3, ")
    assert operations.forget_preview(stored)["empty"] is True


def test_a_damaged_record_can_be_forgotten(backend: Any, terminal: list[str]):
    from tests.django.commands.test_inspect import damage

    damage("alarm:junk")
    terminal.append("yes")
    out = run("xsm_forget", "alarm:junk").out
    assert out.startswith(
        "This erases 'alarm:junk' (a damaged record: Snapshot of 'alarm:junk' (version 1) is not"
    )
    assert "Forgot 'alarm:junk': record 1, " in out
    assert stores.get_store().load("alarm:junk") is None


def test_nothing_stored(backend: Any):
    with pytest.raises(CommandError) as info:
        run("xsm_forget", "alarm:none", "--yes")
    assert str(info.value) == "Nothing is stored under 'alarm:none' (check the key)"


def test_refuses_without_a_terminal(stored: str):
    with pytest.raises(CommandError) as info:
        run("xsm_forget", stored)
    assert "there is no terminal; pass --yes to erase without asking" in str(info.value)
    assert machines["alarm"].objects.exists(stored) and rows(stored) == 2


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    answers: list[str] = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda prompt: answers.pop(0))
    return answers


def test_asks_on_a_terminal(stored: str, terminal: list[str]):
    terminal.append("no")
    with pytest.raises(CommandError, match="Cancelled: nothing was erased"):
        run("xsm_forget", stored)
    assert machines["alarm"].objects.exists(stored)
    terminal.append("yes")
    out = run("xsm_forget", stored).out
    first, second = out.splitlines()
    assert first.startswith(
        "This erases 'alarm:1' (alarm instance in state \"waiting\", version 3, updated "
    )
    assert first.endswith("; with a transition log and 2 idempotency row(s)). It cannot be undone.")
    assert second.startswith("Forgot 'alarm:1': record 1, ")
    assert not machines["alarm"].objects.exists(stored)


def test_noinput_alias_and_verbosity(stored: str):
    assert run("xsm_forget", stored, "--noinput", "-v", "0").out == ""
    assert not machines["alarm"].objects.exists(stored)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "the following arguments are required: KEY"),
        (["", "--yes"], "key must not be empty"),
        (["a\nb", "--yes"], "contains control characters"),
        (["x" * 2000, "--yes"], "characters long, over"),
        (["alarm:1", "alarm:2", "--yes"], "unrecognized arguments: alarm:2"),
    ],
)
def test_bad_arguments(backend: Any, args: list[str], fragment: str):
    with pytest.raises(CommandError) as info:
        run("xsm_forget", *args)
    assert fragment in str(info.value)
