"""Own ``redis-server`` processes for fault tests.

Each :class:`RedisServer` runs ``/usr/bin/redis-server`` (or the binary
``XSM_REDIS_SERVER`` names: the Redis 6.2 CI leg) on a free loopback
port with its own data directory, is stopped by pid (terminate, then kill)
and never touches the shared server at 127.0.0.1:6379. Waiting is a poll
with a deadline, never a bare sleep.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

REDIS_SERVER = os.environ.get("XSM_REDIS_SERVER") or "/usr/bin/redis-server"

needs_redis_server = pytest.mark.skipif(
    not os.access(REDIS_SERVER, os.X_OK), reason=f"{REDIS_SERVER} is not installed"
)


@functools.cache
def server_version() -> tuple[int, int]:
    """(major, minor) of :data:`REDIS_SERVER`; (0, 0) when it does not run."""
    try:
        out = subprocess.run(
            [REDIS_SERVER, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except OSError:
        return (0, 0)
    found = re.search(r"v=(\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_until(predicate: Callable[[], Any], *, timeout: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


class RedisServer:
    """One redis-server process on 127.0.0.1:<port> with its own ``--dir``."""

    def __init__(
        self,
        *,
        appendonly: bool = False,
        extra: Sequence[str] = (),
        directory: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.owns_dir = directory is None
        self.dir = directory or Path(tempfile.mkdtemp(prefix="xsm-redis-"))
        self.appendonly = appendonly
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def argv(self) -> list[str]:
        # No snapshots unless asked: Redis 6.2 drops a later --save after --save "".
        save = [] if "--save" in self.extra else ["--save", ""]
        argv = [
            REDIS_SERVER,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            *save,
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
            "--logfile",
            str(self.dir / "redis.log"),
        ]
        if self.appendonly:
            argv += ["--appendfsync", "always"]
        return argv + self.extra

    def start(self, *, wait: bool = True) -> RedisServer:
        self.proc = subprocess.Popen(
            self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 10.0) -> None:
        import redis

        def ping() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"redis-server exited: {self.log_tail()}")
            c = redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5)
            try:
                return bool(c.ping())
            finally:
                c.close()

        deadline = time.monotonic() + timeout
        while True:
            try:
                if ping():
                    return
            except AssertionError:
                raise
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"redis-server not ready: {self.log_tail()}")
            time.sleep(0.01)

    def client(self, **kwargs: Any) -> Any:
        import redis

        kwargs.setdefault("socket_timeout", 2.0)
        kwargs.setdefault("socket_connect_timeout", 2.0)
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def log_tail(self) -> str:
        try:
            return (self.dir / "redis.log").read_text()[-2000:]
        except OSError:
            return ""

    # --- signals -------------------------------------------------------------

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def kill9(self) -> None:
        """SIGKILL: no shutdown, no final fsync; only what was acknowledged."""
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Terminate by pid, then kill; never by name."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def restart(self) -> RedisServer:
        """Start a new process on the same port and directory."""
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.stop()
        if self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def redis_server(**kwargs: Any) -> Iterator[RedisServer]:
    server = RedisServer(**kwargs).start()
    try:
        yield server
    finally:
        server.cleanup()
