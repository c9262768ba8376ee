"""The live stream across processes: uvicorn (ASGI) and gunicorn (WSGI, sync
workers) serve the same project on a redis-server this module starts, so
Redis can be killed and restarted mid-stream. A commit made through one
server reaches a stream opened on the other; a client resumes with
Last-Event-ID; refusals and hostile input get bounded, clear answers."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_xsm.redis.keys import DEFAULT_BUCKETS, KeyLayout
from django_xsm.redis.log import MAX_SEQ
from tests.redis.servers import RedisServer, needs_redis_server, wait_until
from tests.stream.servers import Server, Stream, bump, environment, migrate, request, running

pytestmark = [pytest.mark.fault, needs_redis_server]

pytest.importorskip("uvicorn")
pytest.importorskip("gunicorn")

PREFIX = "xsmtest-live"


class Pair:
    def __init__(self, redis_server: RedisServer, asgi: Server, wsgi: Server) -> None:
        self.redis = redis_server
        self.asgi = asgi
        self.wsgi = wsgi

    def by_name(self, name: str) -> Server:
        return {"uvicorn": self.asgi, "gunicorn": self.wsgi}[name]

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.redis.port, socket_timeout=2)

    def log_key(self, key: str) -> str:
        return KeyLayout(PREFIX, DEFAULT_BUCKETS).log(key)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    folder = Path(tempfile.mkdtemp(prefix="xsm-live-"))
    server = RedisServer(appendonly=True, directory=folder / "redis")
    (folder / "redis").mkdir()
    server.start()
    env = environment(server.url, PREFIX, folder / "db.sqlite3", XSM_TEST_MAX_STREAMS="150")
    try:
        migrate(env)
        with running(Server("uvicorn", env), Server("gunicorn", env)) as (asgi, wsgi):
            yield Pair(server, asgi, wsgi)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def tid() -> str:
    return uuid.uuid4().hex[:10]


def no_error_logged(*servers: Server) -> None:
    """No traceback and no ERROR line, but Django's own line for a 503 it
    answered (``django.request`` logs every 5xx at ERROR)."""
    for server in servers:
        text = server.log()
        assert "Traceback" not in text, text[-3000:]
        errors = [
            line
            for line in text.splitlines()
            if "ERROR" in line and not line.startswith("ERROR django.request Service Unavailable:")
        ]
        assert not errors, errors[:5]


ROUTES = [("gunicorn", "uvicorn"), ("uvicorn", "gunicorn")]


@pytest.mark.parametrize(("stream_on", "commit_on"), ROUTES)
def test_a_commit_through_one_server_reaches_a_stream_on_the_other(
    pair: Pair, stream_on: str, commit_on: str
):
    a, b, t = pair.by_name(commit_on), pair.by_name(stream_on), tid()
    bump(a, t)
    with Stream(b, f"ticket:{t}") as stream:
        assert stream.status == 200, stream.body()[:300]
        assert stream.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        stream.read_until(bool)  # the opening: the stream is live
        bump(a, t)
        (message,) = stream.read_transitions(1)
    assert (message.event, message.seq) == ("transition", 2)
    data = message.json
    assert data["key"] == f"ticket:{t}" and data["seq"] == 2 and data["version"] == 2
    assert (data["event_type"], data["from_state"], data["to_state"]) == ("BUMP", "open", "open")
    assert data["idempotency_key"] and data["correlation_id"] and data["accepted"] is True
    no_error_logged(a, b)


@pytest.mark.parametrize(("stream_on", "commit_on"), ROUTES)
def test_a_client_that_reconnects_gets_exactly_what_it_missed_then_live_ones(
    pair: Pair, stream_on: str, commit_on: str
):
    a, b, t = pair.by_name(commit_on), pair.by_name(stream_on), tid()
    bump(a, t)
    with Stream(b, f"ticket:{t}", last_event_id="0") as stream:
        seen = stream.read_transitions(1)
    assert [m.seq for m in seen] == [1]
    bump(a, t, n=3)  # while disconnected
    with Stream(b, f"ticket:{t}", last_event_id=seen[-1].id) as stream:
        assert [m.seq for m in stream.read_transitions(3)] == [2, 3, 4]
        bump(a, t)
        assert [m.seq for m in stream.read_transitions(4)] == [2, 3, 4, 5]
        assert not [m for m in stream.messages if m.event == "gap"]
    no_error_logged(a, b)


@pytest.mark.parametrize("stream_on", ["uvicorn", "gunicorn"])
def test_a_trimmed_log_sends_one_gap_then_goes_on(pair: Pair, stream_on: str):
    b, t = pair.by_name(stream_on), tid()
    bump(pair.asgi, t, n=6)
    client = pair.client()
    try:
        for seq in (1, 2, 3, 4):  # purged, as xsm_purge_logs or MAXLEN would
            client.xdel(pair.log_key(f"ticket:{t}"), f"{seq}-0")
    finally:
        client.close()
    with Stream(b, f"ticket:{t}", last_event_id="2") as stream:
        stream.read_transitions(2)
    events = [m for m in stream.messages if m.data]
    assert [(m.event, m.id) for m in events] == [
        ("gap", None), ("transition", "5"), ("transition", "6"),
    ]  # fmt: skip
    assert events[0].json == {"key": f"ticket:{t}", "after": 2, "first_seq": 5}


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn"])
def test_refusals_are_problem_documents(pair: Pair, server: str):
    s, t = pair.by_name(server), tid()
    bump(pair.asgi, t)
    cases = [
        ({"token": False}, f"ticket:{t}", 403, "forbidden"),
        ({}, "ticket:nobody-here", 404, "not-found"),
        ({}, "ticket:*", 404, "not-found"),  # glob characters: one literal key
        ({"last_event_id": "-1"}, f"ticket:{t}", 400, "invalid-cursor"),
        ({"last_event_id": "abc"}, f"ticket:{t}", 400, "invalid-cursor"),
        ({"last_event_id": "9" * 5000}, f"ticket:{t}", 400, "invalid-cursor"),
        ({"last_event_id": str(MAX_SEQ + 1)}, f"ticket:{t}", 400, "invalid-cursor"),
        ({"query": "?after=1e9"}, f"ticket:{t}", 400, "invalid-cursor"),
        ({}, "ticket:%00", 400, "invalid-key"),
    ]
    for kwargs, key, status, slug in cases:
        with Stream(s, key, **kwargs) as stream:
            assert stream.status == status, (kwargs, key, stream.status)
            assert stream.headers["Content-Type"] == "application/problem+json"
            body = json.loads(stream.body())
            assert body["status"] == status and body["type"].endswith(f"/_xsm/problems/{slug}")
    # a seq past the log: a gap, then the log from its start
    with Stream(s, f"ticket:{t}", last_event_id=str(MAX_SEQ)) as stream:
        stream.read_transitions(1)
    assert [m.event for m in stream.messages if m.data] == ["gap", "transition"]
    no_error_logged(s)


def test_a_thousand_connections_attempted_are_bounded_per_process(pair: Pair):
    """150 streams (the bound) of 150 instances, more than a redis-py pool
    holds by default: the 850 attempts beyond get 503 + Retry-After, and
    requests of the same process still commit (streams read on a client
    of their own), which the held streams receive."""
    tids = [tid() for _ in range(150)]
    for t in tids:
        bump(pair.wsgi, t)
    held: list[socket.socket] = []
    statuses: list[int] = []
    try:
        for n in range(1000):
            t = tids[min(n, len(tids) - 1)]
            sock = socket.create_connection(("127.0.0.1", pair.asgi.port), timeout=10)
            sock.sendall(
                f"GET /_xsm/stream/ticket:{t} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "X-Test-Token: let-me-in\r\n\r\n".encode()
            )
            first = sock.recv(4096)
            status = int(first.split(b" ", 2)[1])
            statuses.append(status)
            if status == 200:
                held.append(sock)
            else:
                assert b"retry-after: 5" in first.lower(), first
                sock.close()
        assert statuses.count(200) == 150 and statuses.count(503) == 850
        bump(pair.asgi, tids[7])  # through the process holding every stream
        got = b""
        while b"event: transition" not in got:
            got += held[7].recv(65536)
        assert f'"key":"ticket:{tids[7]}","seq":2'.encode() in got
    finally:
        for sock in held:
            sock.close()
    # the slots come back once those clients are gone
    wait_until(
        lambda: Stream(pair.asgi, f"ticket:{tids[0]}").status == 200,
        timeout=10,
        what="a free stream slot",
    )
    no_error_logged(pair.asgi)


@pytest.mark.parametrize("stream_on", ["uvicorn", "gunicorn"])
def test_redis_killed_mid_stream_ends_it_cleanly_and_the_client_resumes(pair: Pair, stream_on: str):
    b, t = pair.by_name(stream_on), tid()
    a = pair.asgi if b is pair.wsgi else pair.wsgi
    bump(a, t)
    with Stream(b, f"ticket:{t}", last_event_id="0", timeout=20) as stream:
        seen = stream.read_transitions(1)
        pair.redis.kill9()
        stream.read_to_end(timeout=20)  # ends by itself, no hang
    assert stream.ended and stream.messages[-1].retry is not None
    with Stream(b, f"ticket:{t}", last_event_id=seen[-1].id) as refused:
        assert refused.status == 503 and refused.headers.get("Retry-After")
    pair.redis.start()
    wait_until(lambda: request(a, "GET", "/_xsm/ready")[0] == 200, timeout=20, what="ready")
    bump(a, t, n=2)
    # as an EventSource does: reconnect with the last id received until the
    # stream delivers (a reconnect may still meet a slow Redis and end)
    received, last_id = [], seen[-1].id
    for _ in range(5):
        with Stream(b, f"ticket:{t}", last_event_id=last_id) as stream:
            if stream.status != 200:
                continue
            stream.read_until(lambda got: sum(m.event == "transition" for m in got) >= 2)
        received += [m.seq for m in stream.transitions()]
        last_id = str(received[-1]) if received else last_id
        if len(received) >= 2:
            break
    assert received == [2, 3]  # nothing lost, nothing twice
    text = b.log()
    assert "The live stream of 'ticket:" in text and "ended" in text
    no_error_logged(a, b)
