"""The live stream (``/_xsm/stream/<key>``, django_xsm.stream) in-process:
through the WSGI handler (``Client``: the sync generator) and the ASGI
handler (``AsyncClient``: the async generator on ``redis.asyncio``), on
fakeredis and on the live server. Two real servers sharing a redis-server
are tests/stream/test_two_servers.py."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from django_xsm import stream as live
from django_xsm.backend import get_backend
from django_xsm.redis.log import MAX_SEQ
from django_xsm.registry import machines
from tests.redis.servers import needs_redis_server, redis_server
from tests.stream import inprocess
from tests.stream.inprocess import URL, Outcome, transitions

pytestmark = pytest.mark.django_db(transaction=False)

ALLOW = "tests.stream.permissions.anyone"


@pytest.fixture(params=["wsgi", "asgi"])
def watch(request: pytest.FixtureRequest) -> Callable[..., Outcome]:
    """``watch(key, until=..., during=..., headers=..., query=...)`` through
    the WSGI or the ASGI handler (tests.stream.inprocess.watch)."""
    return functools.partial(inprocess.watch, request.param)


@pytest.fixture
def streams(backend: Any, xsm: Any, settings: Any) -> Callable[..., None]:
    """``streams(**STREAM)``: the stream settings of a test (anyone may
    follow, short heartbeats and lifetimes unless given)."""

    def apply(**given: Any) -> None:
        value = {"PERMISSION": ALLOW, "HEARTBEAT_S": 0.3, "MAX_SECONDS": 4, **given}
        xsm(STREAM=value, PREFIX=settings.XSM["PREFIX"], **_connection(settings.XSM))

    apply()
    return apply


def _connection(current: dict[str, Any]) -> dict[str, Any]:
    return {k: current[k] for k in ("REDIS_URL", "EMBEDDED") if k in current}


def bump(key: str, n: int = 1, **kw: Any) -> None:
    for _ in range(n):
        machines["ticket"].objects.send(key, "BUMP", create=True, **kw)


# --- what a stream carries ---------------------------------------------------------------


def test_a_commit_made_while_streaming_arrives_with_every_field(watch: Any, streams: Any):
    bump("ticket:s1")
    got = watch(
        "ticket:s1",
        until=transitions(1),
        during=lambda: bump("ticket:s1", actor="alice", reason="live"),
    )
    assert got.status == 200
    assert got.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert got.headers["Cache-Control"] == "no-cache, no-transform"
    assert got.headers["X-Accel-Buffering"] == "no"
    assert got.messages[0].retry == live.RETRY_MS
    (message,) = got.transitions
    assert (message.event, message.seq) == ("transition", 2)
    data = message.json
    assert set(data) == {
        "key", "seq", "version", "event_type", "payload", "actor", "reason", "from_state",
        "to_state", "idempotency_key", "correlation_id", "timestamp_ms", "accepted",
    }  # fmt: skip
    assert data["key"] == "ticket:s1" and data["seq"] == 2 and data["version"] == 2
    assert (data["event_type"], data["actor"], data["reason"]) == ("BUMP", "alice", "live")
    assert (data["from_state"], data["to_state"], data["accepted"]) == ("open", "open", True)
    (record,) = machines["ticket"].objects.history("ticket:s1", after_seq=1)
    assert data == record.to_dict()


def test_without_a_cursor_a_stream_sends_only_what_is_committed_after_it_opened(
    watch: Any, streams: Any
):
    bump("ticket:s2", 3)
    got = watch("ticket:s2", until=transitions(1), during=lambda: bump("ticket:s2"))
    assert [m.seq for m in got.transitions] == [4]


def test_last_event_id_resumes_exactly_after_it_then_goes_on_live(watch: Any, streams: Any):
    bump("ticket:s3", 5)
    got = watch(
        "ticket:s3",
        headers={"Last-Event-ID": "2"},
        until=transitions(4),
        during=lambda: bump("ticket:s3"),
    )
    assert [m.seq for m in got.transitions] == [3, 4, 5, 6]
    assert not [m for m in got.messages if m.event == "gap"]


def test_after_does_the_same_and_the_header_wins_over_it(watch: Any, streams: Any):
    bump("ticket:s4", 4)
    by_query = watch("ticket:s4", query="after=2", until=transitions(2))
    assert [m.seq for m in by_query.transitions] == [3, 4]
    # an EventSource reconnecting keeps the URL's ?after= and sends its newer id
    both = watch(
        "ticket:s4",
        query="after=1",
        headers={"Last-Event-ID": "3"},
        until=transitions(1),
    )
    assert [m.seq for m in both.transitions] == [4]


def test_a_client_catches_up_in_batches_in_order(watch: Any, streams: Any):
    bump("ticket:s5", live.BATCH + 20)
    got = watch("ticket:s5", query="after=0", until=transitions(live.BATCH + 20))
    assert [m.seq for m in got.transitions] == list(range(1, live.BATCH + 21))


def test_a_trimmed_log_is_announced_by_one_gap_message(watch: Any, streams: Any):
    bump("ticket:s6", 5)
    # the oldest three records are trimmed away (as MAXLEN or xsm_purge_logs do)
    log = get_backend().log
    stream_key = log.driver.run(log.core.state.ensure()).log("ticket:s6")
    for seq in (1, 2, 3):
        log.client.xdel(stream_key, f"{seq}-0")
    got = watch("ticket:s6", headers={"Last-Event-ID": "1"}, until=transitions(2))
    assert [(m.event, m.id) for m in got.events] == [
        ("gap", None), ("transition", "4"), ("transition", "5"),
    ]  # fmt: skip
    assert got.events[0].json == {"key": "ticket:s6", "after": 1, "first_seq": 4}


def test_a_cursor_ahead_of_the_log_gets_a_gap_then_the_whole_log(watch: Any, streams: Any):
    bump("ticket:s7", 2)  # e.g. forgotten and created again: seqs started over
    got = watch("ticket:s7", headers={"Last-Event-ID": "40"}, until=transitions(2))
    assert [(m.event, m.id) for m in got.events] == [
        ("gap", None), ("transition", "1"), ("transition", "2"),
    ]  # fmt: skip
    assert got.events[0].json == {"key": "ticket:s7", "after": 40, "first_seq": 1}
    # the largest seq there is: a gap too, not an error
    top = watch("ticket:s7", headers={"Last-Event-ID": str(MAX_SEQ)}, until=transitions(1))
    assert top.events[0].json["after"] == MAX_SEQ and top.transitions[0].seq == 1


def test_a_quiet_stream_sends_heartbeats_and_ends_after_max_seconds(watch: Any, streams: Any):
    streams(HEARTBEAT_S=0.2, MAX_SECONDS=1)
    bump("ticket:s8")
    got = watch("ticket:s8")  # reads until the stream ends by itself
    beats = [m for m in got.messages if "keep-alive" in m.comments]
    assert len(beats) >= 3
    assert 1 <= got.elapsed < 3
    assert live.open_streams() == 0


# --- refusals ------------------------------------------------------------------------------


def test_an_unknown_key_is_a_404_problem(watch: Any, streams: Any):
    got = watch("ticket:nobody")
    assert got.status == 404
    assert got.problem()["type"].endswith("/_xsm/problems/not-found")
    assert live.open_streams() == 0


def test_a_key_with_glob_characters_is_one_literal_key(watch: Any, streams: Any):
    bump("ticket:a1")
    assert watch("ticket:*").status == 404  # not "every ticket"
    assert watch("ticket:a[1]?").status == 404
    bump("ticket:*[?]")
    got = watch("ticket:*%5B%3F%5D", query="after=0", until=transitions(1))
    assert got.status == 200 and got.transitions[0].json["key"] == "ticket:*[?]"


def test_an_invalid_key_is_a_400_problem(watch: Any, streams: Any):
    got = watch("ticket:%00bad")
    assert got.status == 400 and got.problem()["type"].endswith("/invalid-key")
    assert watch("x" * 600).status == 400


@pytest.mark.parametrize(
    "cursor", ["-1", "abc", "1.5", "0x10", " ", "1 2", "١٢", str(MAX_SEQ + 1), "9" * 400]
)
def test_a_bad_cursor_is_a_400_problem(watch: Any, streams: Any, cursor: str):
    bump("ticket:c1")
    if cursor.strip() and cursor.isascii():  # a header is latin-1 on the wire
        got = watch("ticket:c1", headers={"Last-Event-ID": cursor})
        assert got.status == 400, cursor
        assert got.problem()["type"].endswith("/_xsm/problems/invalid-cursor")
    # until its first message: an open stream would otherwise run to MAX_SECONDS (4 s)
    got = watch("ticket:c1", query=f"after={cursor}", until=bool)
    if cursor.strip():
        assert got.status == 400, cursor
    else:  # an empty cursor is no cursor: the stream opens, the transition is not replayed
        assert got.status == 200 and got.transitions == [], got.messages


def test_a_refused_permission_is_a_403_problem_before_any_lookup(watch: Any, streams: Any):
    streams(PERMISSION="tests.stream.permissions.nobody")
    got = watch("ticket:nobody-either")  # no instance: still 403, nothing leaks
    assert got.status == 403
    assert got.problem()["type"].endswith("/_xsm/problems/forbidden")


def test_the_default_permission_is_a_staff_user_with_view_instance(
    watch: Any, streams: Any, django_user_model: Any
):
    from django.contrib.auth.models import Permission

    streams(PERMISSION="django_xsm.stream.staff_may_view")
    bump("ticket:p1")
    view = Permission.objects.get(content_type__app_label="django_xsm", codename="view_instance")
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    staff.user_permissions.add(view)
    plain = django_user_model.objects.create_user("plain", is_staff=False)
    plain.user_permissions.add(view)
    bare = django_user_model.objects.create_user("bare", is_staff=True)
    assert watch("ticket:p1").status == 403  # anonymous
    assert watch("ticket:p1", login=plain).status == 403
    assert watch("ticket:p1", login=bare).status == 403
    got = watch("ticket:p1", login=staff, query="after=0", until=transitions(1))
    assert got.status == 200 and got.transitions[0].seq == 1


def test_the_default_permission_asks_the_machines_view_rules_about_the_key(
    watch: Any, streams: Any, django_user_model: Any, xsm: Any, settings: Any
):
    from django.contrib.auth.models import Permission

    from tests.fieldapp import permissions

    ticket = {"CONFIG": settings.XSM["MACHINES"]["ticket"],
              "PERMISSIONS": {"xsm.view": "tests.fieldapp.permissions.small_orders"}}  # fmt: skip
    xsm(MACHINES={**settings.XSM["MACHINES"], "ticket": ticket})
    streams(PERMISSION="django_xsm.stream.staff_may_view")
    bump("ticket:v1")
    bump("ticket:v1-locked")
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    staff.user_permissions.add(
        Permission.objects.get(content_type__app_label="django_xsm", codename="view_instance")
    )
    permissions.CALLS.clear()
    assert watch("ticket:v1-locked", login=staff).status == 403
    assert permissions.CALLS == [("staff", "ticket:v1-locked", None)]
    got = watch("ticket:v1", login=staff, query="after=0", until=transitions(1))
    assert got.status == 200 and got.transitions[0].seq == 1
    assert watch("ticket:v1").status == 403  # anonymous: refused before any rule
    assert [c[1] for c in permissions.CALLS] == ["ticket:v1-locked", "ticket:v1"]


def test_without_the_audit_log_the_stream_says_it_needs_it(watch: Any, streams: Any, xsm: Any):
    bump("ticket:n1")
    xsm(AUDIT={"ENABLED": False})
    got = watch("ticket:n1")
    assert got.status == 404
    body = got.problem()
    assert body["type"].endswith("/_xsm/problems/audit-disabled")
    assert "AUDIT" in body["detail"]


def test_other_methods_are_refused(backend: Any, streams: Any):
    bump("ticket:m1")
    assert Client().post(URL + "ticket:m1").status_code == 405


def test_streams_are_bounded_per_process_with_a_503_and_retry_after(watch: Any, streams: Any):
    streams(MAX_CONNECTIONS=2)
    bump("ticket:b1")
    first, second = Client(), Client()
    held = [first.get(URL + "ticket:b1"), second.get(URL + "ticket:b1")]
    try:
        assert [r.status_code for r in held] == [200, 200]
        assert live.open_streams() == 2
        refused = watch("ticket:b1")
        assert refused.status == 503
        assert refused.headers["Retry-After"] == str(live.RETRY_AFTER_S)
        assert refused.problem()["type"].endswith("/_xsm/problems/too-many-streams")
    finally:
        for response in held:
            response.close()
    assert live.open_streams() == 0  # closing gave the slots back
    assert watch("ticket:b1", query="after=0", until=transitions(1)).status == 200


# The 975 refusals are the process's own count, taken before the store is read (both
# stores serve the bounded streams above): fakeredis only.
@pytest.mark.parametrize("backend", ["fakeredis"], indirect=True)
def test_a_thousand_connections_attempted_get_bounded_clear_answers(backend: Any, streams: Any):
    streams(MAX_CONNECTIONS=25)
    bump("ticket:k1")
    client = Client()
    held, statuses = [], []
    try:
        for _ in range(1000):
            response = client.get(URL + "ticket:k1")
            statuses.append(response.status_code)
            if response.status_code == 200:
                held.append(response)
            else:
                assert response["Retry-After"] == str(live.RETRY_AFTER_S)
        assert statuses.count(200) == 25 and statuses.count(503) == 975
    finally:
        for response in held:
            response.close()
    assert live.open_streams() == 0


def test_stream_url_of_a_model_row(backend: Any, streams: Any):
    from testproject.orders.models import Order

    order = Order.objects.create(id="abc123")
    assert order.status.stream_url == "/_xsm/stream/order:abc123"


# --- Redis failing mid-stream -------------------------------------------------------------


@pytest.mark.fault
@needs_redis_server
def test_redis_dying_mid_stream_ends_it_cleanly_and_the_client_resumes(
    watch: Any, xsm: Any, caplog: Any
):
    with redis_server(appendonly=True) as server:
        xsm(
            REDIS_URL=server.url,
            EMBEDDED=None,
            PREFIX="xsmtest-down",
            SOCKET_TIMEOUT_S=1.0,
            STREAM={"PERMISSION": ALLOW, "HEARTBEAT_S": 0.3, "MAX_SECONDS": 10},
        )
        bump("ticket:d1", 2)

        def kill_after_a_commit() -> None:
            bump("ticket:d1")
            time.sleep(0.3)
            server.kill9()

        with caplog.at_level(logging.WARNING):
            got = watch("ticket:d1", headers={"Last-Event-ID": "2"}, during=kill_after_a_commit)
        assert [m.seq for m in got.transitions] == [3]
        assert got.elapsed < 8  # ended on the failure, not at MAX_SECONDS
        assert got.messages[-1].retry == live.UNAVAILABLE_RETRY_MS
        ended = [r for r in caplog.records if r.name == "django_xsm.stream"]
        assert [r.levelname for r in ended] == ["WARNING"]
        assert "ticket:d1" in ended[0].getMessage() and ended[0].exc_info is None
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert live.open_streams() == 0
        # while Redis is down a new stream is a 503 problem, not a 500
        refused = watch("ticket:d1", headers={"Last-Event-ID": "3"})
        assert refused.status == 503 and refused.headers.get("Retry-After")
        server.start()  # same port and directory: appendonly brings the data back
        bump("ticket:d1")
        again = watch("ticket:d1", headers={"Last-Event-ID": "3"}, until=transitions(1))
        assert [m.seq for m in again.transitions] == [4]


# --- asyncio streams of one instance share one feed ------------------------------------------


def _run_shared(key: str, cursors: list[str | None], commits: int) -> Any:
    """Open one ASGI stream per cursor on ``key`` in one event loop, commit
    ``commits`` times from a thread, read each stream until it has every
    record after its cursor; also report how many feeds and subscribers
    the loop held meanwhile."""
    import asyncio

    from asgiref.sync import async_to_sync, sync_to_async
    from django.test import AsyncClient

    from tests.stream.sse import Parser

    async def run() -> Any:
        clients = [AsyncClient() for _ in cursors]
        responses = [
            await c.get(URL + key, headers={"Last-Event-ID": cur} if cur else {})
            for c, cur in zip(clients, cursors, strict=True)
        ]
        iterators = [r.streaming_content.__aiter__() for r in responses]
        for it in iterators:
            await it.__anext__()  # the opening: each stream has joined the feed
        feeds = dict(live._feeds.get(asyncio.get_running_loop(), {}))
        seen = (len(feeds), sorted(len(f.inboxes) for f in feeds.values()))
        await asyncio.to_thread(bump, key, commits)
        last = 1 + commits  # the instance had one record before
        out = []
        for it, cur in zip(iterators, cursors, strict=True):
            parser, got = Parser(), []
            want = last - (int(cur) if cur else 1)
            while sum(m.event == "transition" for m in got) < want:
                got += parser.feed(await asyncio.wait_for(it.__anext__(), 10))
            out.append(got)
        for r in responses:
            await sync_to_async(r.close)()  # what an ASGI server does at the end
        for _ in range(50):  # closing the responses ended the feed
            if not live._feeds.get(asyncio.get_running_loop()):
                break
            await asyncio.sleep(0.02)
        left = dict(live._feeds.get(asyncio.get_running_loop(), {}))
        return seen, out, left

    return async_to_sync(run)()


def test_asyncio_streams_of_one_instance_share_one_feed(streams: Any):
    bump("ticket:f1")
    seen, out, left = _run_shared("ticket:f1", ["0", None, "1"], commits=3)
    assert seen == (1, [3])  # one feed, three subscribers
    assert [[m.seq for m in got if m.event == "transition"] for got in out] == [
        [1, 2, 3, 4], [2, 3, 4], [2, 3, 4],
    ]  # fmt: skip
    assert left == {}  # the feed ended with its last stream
    assert live.open_streams() == 0


def test_a_stream_whose_inbox_overflows_reads_the_log_itself(
    streams: Any, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(live, "INBOX_LIMIT", 0)  # every hand-over overflows
    bump("ticket:f2")
    _, out, _ = _run_shared("ticket:f2", ["1", None], commits=4)
    assert [[m.seq for m in got if m.event == "transition"] for got in out] == [
        [2, 3, 4, 5], [2, 3, 4, 5],
    ]  # fmt: skip
    assert not [m for got in out for m in got if m.event == "gap"]
