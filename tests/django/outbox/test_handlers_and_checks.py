"""Handlers are dotted paths imported once, with errors naming the setting;
``manage.py check`` reports handlers that do not load (xsm.E014) and the
event types charts emit that no pattern takes (xsm.E013)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from django_xsm.checks import check_settings
from django_xsm.outbox import emitted_types, get_handlers
from tests.django.outbox import handlers
from tests.django.outbox.conftest import HANDLERS, run
from tests.django.outbox.machines import shipment

BAD = [
    (
        "tests.django.outbox.nowhere.handler",
        "cannot import 'tests.django.outbox.nowhere.handler': No module named "
        "'tests.django.outbox.nowhere' (give the dotted path",
    ),
    (
        "tests.django.outbox.handlers.missing",
        "cannot import 'tests.django.outbox.handlers.missing'",
    ),
    ("nodots", "cannot import 'nodots'"),
    (
        "tests.django.outbox.handlers.NOT_A_HANDLER",
        "'tests.django.outbox.handlers.NOT_A_HANDLER' is a dict, not callable (point at a "
        "function handler(event, *, delivery)",
    ),
    (
        "tests.django.outbox.handlers.no_delivery",
        "cannot be called as handler(event, delivery=...) (define it as "
        "def handler(event, *, delivery): ...)",
    ),
    (
        "tests.django.outbox.broken_handlers.handler",
        "importing 'tests.django.outbox.broken_handlers.handler' raised RuntimeError: the "
        "effects module is broken (fix that module",
    ),
]


@pytest.mark.parametrize(("path", "message"), BAD)
def test_a_bad_handler_path_names_the_setting_and_the_fix(
    outbox_settings: Callable[..., None], path: str, message: str
) -> None:
    outbox_settings(HANDLERS={**HANDLERS, "order.refund": path})
    with pytest.raises(ImproperlyConfigured) as info:
        get_handlers()
    assert str(info.value).startswith("XSM['OUTBOX']['HANDLERS']['order.refund']: ")
    assert message in str(info.value)
    # the worker refuses to start, with the same words
    with pytest.raises(CommandError, match=r"XSM\['OUTBOX'\]\['HANDLERS'\]\['order.refund'\]"):
        run("xsm_run_outbox", "--once")
    (error,) = [m for m in check_settings() if m.id == "xsm.E014"]
    assert message in error.msg


def test_handlers_are_imported_once_per_settings(outbox_settings: Callable[..., None]) -> None:
    table = get_handlers()
    assert get_handlers() is table
    route = table.route("order.paid")
    assert route is not None and route.handler is handlers.record
    outbox_settings(HANDLERS={"*": "tests.django.outbox.handlers.catch_all"})
    assert get_handlers() is not table  # a settings change rebuilds it


def test_the_charts_emitted_types_are_found_with_their_paths() -> None:
    found = emitted_types(shipment)
    assert found == {
        "order.paid": ["states.new.on.PAY.actions[0]"],
        "order.shipped": ["states.paid.on.SHIP.actions"],
    }


def _e013(messages: list[Any]) -> list[str]:
    """The E013 messages about this directory's machines (the test project's
    own machines are the test settings' business)."""
    mine = ("Machine 'shipment' ", "Machine 'mute' ")
    return sorted(m.msg for m in messages if m.id == "xsm.E013" and m.msg.startswith(mine))


def test_e013_names_each_emitted_type_no_pattern_takes(
    outbox_settings: Callable[..., None],
) -> None:
    assert _e013(check_settings()) == []  # order.paid, order.*, mute.* cover every chart
    outbox_settings(HANDLERS={"order.paid": "tests.django.outbox.handlers.record"})
    messages = [m for m in check_settings() if m.id == "xsm.E013"]
    assert _e013(messages) == [
        "Machine 'mute' emits 'mute.ping' (at states.idle.on.PING.actions), which no pattern "
        "of XSM['OUTBOX']['HANDLERS'] takes",
        "Machine 'shipment' emits 'order.shipped' (at states.paid.on.SHIP.actions), which no "
        "pattern of XSM['OUTBOX']['HANDLERS'] takes",
    ]
    assert all("XSM['OUTBOX']['HANDLERS']['" in m.hint for m in messages)
    assert all("dead-letters these events" in m.hint for m in messages)
    outbox_settings(HANDLERS={"*": "tests.django.outbox.handlers.catch_all"})
    assert _e013(check_settings()) == []
    # a dynamic type (instance.emit in a Python action) is not the check's to see
    outbox_settings(
        HANDLERS={
            "order.*": "tests.django.outbox.handlers.catch_all",
            "mute.ping": "tests.django.outbox.handlers.record",
        }
    )
    assert _e013(check_settings()) == []
