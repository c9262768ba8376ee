"""The ``xsm`` helper (``django_xsm.testing.Xsm``): a namespace per test,
a clock that ``advance()`` moves through the real timer scanner, the
outbox's ``emitted`` and ``deliver()``, ``history()``, and clear errors
for bad use. On the embedded fakeredis and, with ``XSM_REDIS_URL``, the
live server."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from django_xsm import backend as stores
from django_xsm.exceptions import ArgumentTypeError, InvalidConfigError
from django_xsm.persistence.base import system_clock_ms
from django_xsm.redis import escape_glob
from django_xsm.registry import machines
from django_xsm.testing import EmittedEvent, Xsm
from django_xsm.testing import helper as helper_module
from tests.django.outbox import handlers as outbox_handlers
from tests.testing import handlers


def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s")

    monkeypatch.setattr(time, "sleep", refuse)


# --- the clock ---------------------------------------------------------------------------


def test_the_clock_stands_still_from_the_tests_start(helper: Xsm) -> None:
    start = helper.clock.now_ms
    assert abs(start - system_clock_ms()) < 60_000
    assert stores.now_ms() == start
    machines["ticket"].objects.send("t:1", "BUMP", create=True)
    assert [d.due_ms for d in machines["ticket"].objects.get("t:1").deadlines] == [start + 60_000]
    assert helper.now.timestamp() * 1000 == start
    assert stores.now_ms() == start  # nothing moved it


def test_advance_fires_a_timer_once_it_is_due_and_never_sleeps(
    helper: Xsm, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = machines["ticket"].objects
    objects.send("t:1", "BUMP", create=True)
    no_sleep(monkeypatch)
    assert helper.advance(59.999) == 0
    assert objects.get("t:1").value == "open"
    assert helper.advance(0.001) == 1
    assert objects.get("t:1").value == "stale"
    assert helper.advance(3600) == 0  # fired once
    record = helper.history("t:1")[-1]
    assert (record.actor, record.reason, record.to_state) == ("xsm:timer", "timer", "stale")


def test_advance_fires_in_time_order_and_the_timers_fires_arm(helper: Xsm) -> None:
    start = helper.clock.now_ms
    with machines["relay"].objects.open("r:1") as block:
        block.save_created()
    assert helper.advance(10) == 2  # a -> b after 1 s, b -> c one second later
    assert machines["relay"].objects.get("r:1").value == "c"
    stamps = [r.timestamp_ms - start for r in helper.history("r:1")]
    assert stamps == [1000, 2000]
    assert helper.clock.now_ms == start + 10_000


def test_advance_zero_fires_what_is_due_now(helper: Xsm) -> None:
    with machines["relay"].objects.open("r:1") as block:
        block.save_created()
    assert helper.advance(0) == 0
    assert helper.advance(1) == 1
    assert helper.advance(0) == 0


def test_a_timer_re_arming_itself_at_once_is_called_out(
    helper: Xsm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(helper_module, "_SAME_TIME_PASSES", 5)  # 100 by default
    with machines["spin"].objects.open("s:1") as block:
        block.save_created()
    with pytest.raises(
        InvalidConfigError, match=r"without the clock moving \(5 passes\)"
    ) as caught:
        helper.advance(1)
    assert caught.value.path == "after"
    assert len(helper.history("s:1")) == 5  # the fires before it stopped are durable


def test_a_failing_timer_is_retried_on_the_policy_then_dead_lettered(
    helper: Xsm, caplog: pytest.LogCaptureFixture
) -> None:
    with machines["fragile"].objects.open("f:1") as block:
        block.save_created()
    assert helper.advance(1) == 0
    assert machines["fragile"].objects.get("f:1").timer_failures  # attempt 1 recorded
    assert stores.get_store().dead_letters() == []
    helper.advance(3600)  # TIMERS: 3 attempts, 10 s backoff at most 20 s
    assert [k for k, _ in stores.get_store().dead_letters()] == ["f:1"]
    assert caplog.text.count("the timer's action failed") == 3


@pytest.mark.parametrize(
    ("seconds", "error", "text"),
    [
        (-1, InvalidConfigError, "cannot move the clock by -1 seconds"),
        (-0.5, InvalidConfigError, "time only moves forward"),
        (math.nan, InvalidConfigError, "cannot move the clock by nan seconds"),
        (math.inf, InvalidConfigError, "cannot move the clock by inf seconds"),
        (2.0**60, InvalidConfigError, "advance by less"),
        ("60", ArgumentTypeError, "seconds must be an int or a float, not str"),
        (True, ArgumentTypeError, "seconds must be an int or a float, not bool"),
        (None, ArgumentTypeError, "seconds must be an int or a float, not NoneType"),
    ],
)
def test_bad_advances_are_refused_before_anything_moves(
    helper: Xsm, seconds: Any, error: type[Exception], text: str
) -> None:
    machines["ticket"].objects.send("t:1", "BUMP", create=True)
    start = helper.clock.now_ms
    with pytest.raises(error, match=text):
        helper.advance(seconds)
    assert helper.clock.now_ms == start
    assert machines["ticket"].objects.get("t:1").value == "open"


def test_a_far_advance_is_refused_at_the_engines_limit(helper: Xsm) -> None:
    with pytest.raises(InvalidConfigError, match="cannot move past"):
        helper.advance(2**53 / 1000 - 1)


async def test_async_blocks_read_the_tests_clock(helper: Xsm) -> None:
    async with machines["ticket"].objects.aopen("t:2") as block:
        block.send("BUMP")
    view = await machines["ticket"].objects.aget("t:2")
    assert [d.due_ms for d in view.deadlines] == [helper.clock.now_ms + 60_000]


# --- the namespace -------------------------------------------------------------------------


def test_each_run_has_a_namespace_of_its_own(project: Any) -> None:
    objects = machines["ticket"].objects
    with Xsm() as first:
        objects.send("t:1", "BUMP", create=True)
        objects.send("t:1", "BUMP")
        assert objects.get("t:1").context["count"] == 2
        first_prefix = first.prefix
    with Xsm() as second:
        assert second.prefix != first_prefix
        assert not objects.exists("t:1")
        objects.send("t:1", "BUMP", create=True)
        assert objects.get("t:1").context["count"] == 1
        assert [r.version for r in second.history("t:1")] == [1]


def test_the_projects_settings_and_the_wall_clock_come_back(project: Any) -> None:
    before = dict(settings.XSM)
    with Xsm() as found:
        assert settings.XSM["PREFIX"] == found.prefix
        assert settings.XSM["PREFIX"].startswith(f"{before['PREFIX']}-test-")
    assert before == settings.XSM
    assert not stores.clock_is_set()


def test_on_a_redis_every_key_of_the_namespace_is_erased(project: Any) -> None:
    import redis

    live_url = settings.XSM.get("REDIS_URL")
    if not live_url:
        pytest.skip("the embedded store: its server is dropped with the settings")
    with Xsm() as found:
        machines["shipment"].objects.send("s:1", "PAY", create=True)  # record, log, outbox
        prefix = found.prefix
        client = redis.Redis.from_url(live_url)
        assert list(client.scan_iter(match=f"{{{escape_glob(prefix)}:*", count=1000))
    left = [
        *client.scan_iter(match=f"{{{escape_glob(prefix)}:*", count=1000),
        *client.scan_iter(match=f"{{{escape_glob(prefix)}}}*", count=1000),
    ]
    client.close()
    assert left == []


# --- the outbox ------------------------------------------------------------------------


def test_emitted_lists_what_commits_emitted_delivered_or_not(helper: Xsm) -> None:
    machines["shipment"].objects.send("s:1", "NOTE", kind="hello", text="hi", create=True)
    (note,) = helper.emitted
    assert isinstance(note, EmittedEvent)
    assert (note.type, note.payload, note.key) == ("note.hello", {"text": "hi"}, "s:1")
    assert (note.machine, note.version) == ("shipment", 1)
    assert note.delivery_id.endswith("-0")
    assert helper.deliver().taken == 1  # no handler for note.*: a dead letter
    assert helper.emitted == [note]


def test_deliver_runs_the_handlers_once_and_emitted_keeps_what_they_emitted(
    helper: Xsm,
) -> None:
    machines["shipment"].objects.send("s:1", "PAY", create=True)
    (paid,) = helper.emitted
    result = helper.deliver()
    # order.paid -> ship_it, which sends SHIP; its order.shipped -> catch_all
    assert (result.taken, result.delivered, result.retried) == (2, 2, 0)
    assert handlers.SHIPPED == ["s:1"]
    assert [c[1]["type"] for c in outbox_handlers.CALLS] == ["order.shipped"]
    assert [e.type for e in helper.emitted] == ["order.paid", "order.shipped"]
    assert helper.emitted[0] == paid
    assert helper.deliver().taken == 0


def test_a_failing_handler_is_retried_when_the_tests_clock_says_so(helper: Xsm) -> None:
    outbox_handlers.FAIL["flaky"] = 1
    machines["mute"].objects.send("m:1", "PING", create=True)
    assert helper.deliver().retried == 1
    assert helper.deliver().taken == 0  # the retry waits for the clock
    helper.advance(10)  # BACKOFF_S: within 10 s
    assert helper.deliver().delivered == 1
    assert [c[2].attempt for c in outbox_handlers.CALLS] == [1, 2]


def test_out_of_attempts_is_a_dead_letter_and_a_compensation(helper: Xsm) -> None:
    outbox_handlers.FAIL["flaky"] = -1
    machines["mute"].objects.send("m:1", "PING", create=True)
    for _ in range(2):
        assert helper.deliver().retried == 1
        helper.advance(20)
    result = helper.deliver()
    assert (result.dead_lettered, result.refused) == (1, 1)  # mute refuses compensations
    (ping,) = helper.emitted
    assert ping.type == "mute.ping"


# --- the log -------------------------------------------------------------------------------


def test_history_is_the_transition_log(helper: Xsm) -> None:
    machines["ticket"].objects.send("t:1", "BUMP", create=True, actor="ann")
    (record,) = helper.history("t:1")
    assert (record.event_type, record.actor, record.timestamp_ms) == (
        "BUMP",
        "ann",
        helper.clock.now_ms,
    )
    assert helper.history("t:none") == []


def test_history_without_the_audit_says_so(project: Any) -> None:
    project(AUDIT={"ENABLED": False})
    with Xsm() as found, pytest.raises(InvalidConfigError, match="no transition log is kept"):
        found.history("t:1")


# --- bad use ------------------------------------------------------------------------------


def test_a_helper_that_is_not_running_says_so(project: Any) -> None:
    found = Xsm()
    for use in (
        lambda: found.advance(1),
        lambda: found.emitted,
        found.deliver,
        lambda: found.history("t:1"),
        lambda: found.clock,
        lambda: found.prefix,
    ):
        with pytest.raises(InvalidConfigError, match="this xsm helper is not running"):
            use()
    found.stop()  # nothing to stop: fine
    with found:
        pass
    found.stop()  # twice: fine
    with pytest.raises(InvalidConfigError, match="not running"):
        found.advance(1)


def test_one_helper_at_a_time(helper: Xsm) -> None:
    with pytest.raises(InvalidConfigError, match="another xsm helper is running"):
        Xsm().start()
    assert settings.XSM["PREFIX"] == helper.prefix  # the running one is untouched


def test_without_django_xsm_in_installed_apps_it_refuses(project: Any) -> None:
    apps = [a for a in settings.INSTALLED_APPS if a != "django_xsm"]
    with (
        override_settings(INSTALLED_APPS=apps),
        pytest.raises(InvalidConfigError, match="'django_xsm' is not in INSTALLED_APPS") as caught,
    ):
        Xsm().start()
    assert "add 'django_xsm' to INSTALLED_APPS" in str(caught.value)
    assert not stores.clock_is_set()
    with Xsm():  # nothing was left behind
        pass


def test_through_pytest_djangos_settings_every_change_comes_back_in_order(
    project: Any, settings: Any
) -> None:
    """What the plugin's fixture does: the test's XSM goes through
    pytest-django's ``settings``, so a change the test makes on top of it
    is undone with it, in order (an ``override_settings`` of the helper's
    own, undone first, would leave the test's prefix behind)."""
    from tests.django.settings import XSM as ORIGINAL

    found = Xsm(settings=settings).start()
    settings.XSM = {**settings.XSM, "LOCK": "pessimistic"}  # the test's own change
    assert (settings.XSM["PREFIX"], settings.XSM["LOCK"]) == (found.prefix, "pessimistic")
    machines["ticket"].objects.send("t:1", "BUMP", create=True)
    found.stop()
    assert not stores.clock_is_set()
    settings._finalize()  # pytest-django's teardown, after the helper's
    assert settings.XSM == ORIGINAL
