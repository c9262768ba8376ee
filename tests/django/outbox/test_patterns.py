"""Each event goes to one handler: the most specific pattern that matches
(exact, then the longest prefix, then ``*``), whatever the settings order."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_xsm import conf
from django_xsm.outbox import HandlerTable, matches, most_specific
from tests.django.outbox import handlers

PATTERNS = ["*", "order.*", "order.paid.*", "order.paid", "orders.*", "order.refund"]


@pytest.mark.parametrize(
    ("event_type", "chosen"),
    [
        ("order.paid", "order.paid"),  # exact beats every wildcard
        ("order.paid.late", "order.paid.*"),  # the longer prefix first
        ("order.refund", "order.refund"),
        ("order.shipped", "order.*"),
        ("order", "order.*"),  # a prefix matches its own stem, as in charts
        ("orders.x", "orders.*"),  # whole tokens: order.* does not take orders.x
        ("orderly", "*"),
        ("xsm.outbox.failed", "*"),
    ],
)
def test_the_most_specific_pattern_wins_in_any_order(event_type: str, chosen: str) -> None:
    for order in itertools.permutations(PATTERNS, len(PATTERNS)):
        assert most_specific(order, event_type) == chosen


def test_no_pattern_no_handler() -> None:
    assert most_specific(["order.*", "order.paid"], "invoice.sent") is None
    assert most_specific([], "order.paid") is None
    assert not matches("order.*", "orderpaid")
    assert matches("order.paid.*", "order.paid")


def test_the_table_routes_to_the_imported_callable() -> None:
    table = HandlerTable(
        {
            "*": "tests.django.outbox.handlers.catch_all",
            "order.paid": "tests.django.outbox.handlers.record",
            "order.*": handlers.flaky,  # a callable works as well as a path
        }
    )
    assert table.patterns() == ["order.paid", "order.*", "*"]
    paid = table.route("order.paid")
    assert paid is not None and paid.handler is handlers.record
    assert paid.path == "tests.django.outbox.handlers.record"
    other = table.route("order.shipped")
    assert other is not None and other.handler is handlers.flaky and other.pattern == "order.*"
    rest = table.route("anything")
    assert rest is not None and rest.handler is handlers.catch_all
    assert HandlerTable({}).route("order.paid") is None


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("order*", "'*' is allowed only as the last token"),
        ("*.paid", "'*' is allowed only as the last token"),
        ("order.*.late", "'*' is allowed only as the last token"),
        ("order..paid", "single dots"),
        (".order", "single dots"),
        ("order paid", "no spaces"),
        ("", "non-empty string"),
    ],
)
def test_a_bad_pattern_is_a_settings_error_naming_it(pattern: str, why: str) -> None:
    value: dict[str, Any] = {"PREFIX": "x", "OUTBOX": {"HANDLERS": {pattern: "a.b"}}}
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse(value, debug=False)
    (problem,) = info.value.problems
    assert problem.startswith(f"XSM['OUTBOX']['HANDLERS'][{pattern!r}]: ")
    assert why in problem
    with pytest.raises(ImproperlyConfigured, match="only as the last token"):
        HandlerTable({"order*": handlers.record})


def test_every_bad_entry_is_reported_at_once_and_defaults_merge() -> None:
    value: dict[str, Any] = {
        "PREFIX": "x",
        "OUTBOX": {"HANDLERS": {"a*": "x.y", "ok": 3, "fine": "m.f"}, "MAX_ATTEMPTS": 0},
    }
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse(value, debug=False)
    assert len(info.value.problems) == 3
    assert any("['ok']: expected the dotted path" in p for p in info.value.problems)
    assert any("['MAX_ATTEMPTS']" in p for p in info.value.problems)
    parsed = conf.parse({"PREFIX": "x", "OUTBOX": {"MAX_ATTEMPTS": 4}}, debug=False).outbox
    assert (parsed.max_attempts, parsed.backoff_s, parsed.max_backoff_s) == (4, 1.0, 300.0)
    assert parsed.visibility_timeout_ms == 60_000 and parsed.handlers == {}


def test_defaults_of_outbox_and_timers_share_the_backoff_policy() -> None:
    s = conf.parse({"PREFIX": "x"}, debug=False)
    assert (s.outbox.max_attempts, s.outbox.backoff_s, s.outbox.max_backoff_s) == (10, 1.0, 300.0)
    assert (s.timers.max_attempts, s.timers.backoff_s, s.timers.max_backoff_s) == (10, 1.0, 300.0)


@pytest.mark.parametrize("section", ["OUTBOX", "TIMERS"])
def test_a_cap_below_the_first_wait_is_refused(section: str) -> None:
    value: dict[str, Any] = {"PREFIX": "x", section: {"BACKOFF_S": 5, "MAX_BACKOFF_S": 2}}
    with pytest.raises(conf.InvalidSettings) as info:
        conf.parse(value, debug=False)
    assert info.value.problems == (
        f"XSM['{section}']['MAX_BACKOFF_S']: 2 s is below BACKOFF_S (5 s) (the longest wait "
        "must be at least the first one; e.g. BACKOFF_S 1.0 and MAX_BACKOFF_S 300.0)",
    )
