"""Real HTTP servers for the stream tests: uvicorn (ASGI) and gunicorn
(WSGI, sync workers) on free loopback ports, sharing one redis-server and
one SQLite file, each started as its own process group and stopped by pid.
An SSE client on ``http.client`` reads what a browser's EventSource would."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.redis.servers import free_port, wait_until
from tests.stream.sse import Message, Parser

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = "tests.stream.server_settings"


def environment(redis_url: str, prefix: str, database: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XSM_TEST_")}
    env.update(
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PYTHONPATH=str(ROOT),
        XSM_TEST_REDIS_URL=redis_url,
        XSM_TEST_PREFIX=prefix,
        XSM_TEST_DB=str(database),
        **extra,
    )
    return env


def migrate(env: dict[str, str]) -> None:
    """Create the tables of the shared SQLite file (users, sessions, orders)."""
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"],
        env=env,
        cwd=ROOT,
        check=True,
        timeout=120,
    )


@dataclass
class Server:
    """One server process; ``log()`` is what it wrote to stderr so far."""

    kind: str
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    stderr: Path = field(default_factory=lambda: Path(tempfile.mkstemp(suffix=".log")[1]))

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        bind = ["127.0.0.1", str(self.port)]
        if self.kind == "uvicorn":
            return [
                sys.executable, "-m", "uvicorn", "tests.stream.asgi:application",
                "--host", bind[0], "--port", bind[1], "--no-access-log",
                "--log-level", "warning", "--timeout-graceful-shutdown", "2",
            ]  # fmt: skip
        # sync workers: each stream holds one (docs/live.md); three workers let
        # a test stream from one and commit through another
        return [
            sys.executable, "-m", "gunicorn", "tests.stream.wsgi:application",
            "--bind", ":".join(bind), "--workers", "3", "--worker-class", "sync",
            "--timeout", "120", "--graceful-timeout", "2", "--log-level", "warning",
        ]  # fmt: skip

    def start(self) -> Server:
        with self.stderr.open("ab") as err:
            self.proc = subprocess.Popen(
                self.argv(),
                env=self.env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        wait_until(self._healthy, timeout=30, what=f"{self.kind} on port {self.port}")
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.kind} exited: {self.log()[-2000:]}")
        status, _, _ = request(self, "GET", "/_xsm/health", timeout=1)
        return status == 200

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM to the server's own process group (its workers), then SIGKILL."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextlib.contextmanager
def running(*servers: Server) -> Iterator[tuple[Server, ...]]:
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()
            server.stderr.unlink(missing_ok=True)


def request(
    server: Server,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout: float = 10,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def bump(server: Server, tid: str, *, n: int = 1) -> list[dict[str, Any]]:
    """``n`` BUMP commits of ``ticket:<tid>`` through ``server``'s HTTP API."""
    import json

    out = []
    for _ in range(n):
        key = os.urandom(8).hex()
        status, _, body = request(
            server, "POST", f"/t/{tid}/bump", headers={"Idempotency-Key": key}
        )
        assert status == 201, (status, body[:300])
        out.append(json.loads(body))
    return out


class Stream:
    """An open ``GET /_xsm/stream/<key>`` read like an EventSource."""

    def __init__(
        self,
        server: Server,
        key: str,
        *,
        last_event_id: str | None = None,
        query: str = "",
        token: bool = True,
        timeout: float = 10,
    ) -> None:
        headers = {"Accept": "text/event-stream"}
        if token:
            headers["X-Test-Token"] = "let-me-in"
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
        self.conn.request("GET", f"/_xsm/stream/{key}{query}", headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = dict(self.response.getheaders())
        self.parser = Parser()
        self.messages: list[Message] = []
        self.ended = False

    def body(self) -> bytes:
        return self.response.read()

    def read_until(self, predicate: Any, *, timeout: float = 10) -> list[Message]:
        """Read until ``predicate(messages)`` holds, the stream ends, or
        ``timeout`` (AssertionError)."""
        deadline = time.monotonic() + timeout
        while not predicate(self.messages):
            if self.ended:
                return self.messages
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; got {self.messages}")
            chunk = self.response.read1(65536)
            if not chunk:
                self.ended = True
            self.messages += self.parser.feed(chunk)
        return self.messages

    def transitions(self) -> list[Message]:
        return [m for m in self.messages if m.event == "transition"]

    def read_transitions(self, n: int, *, timeout: float = 10) -> list[Message]:
        self.read_until(lambda got: sum(m.event == "transition" for m in got) >= n, timeout=timeout)
        return self.transitions()

    def read_to_end(self, *, timeout: float = 30) -> list[Message]:
        return self.read_until(lambda got: False, timeout=timeout)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
