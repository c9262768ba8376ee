"""How deep is django-xsm when a ``@stateful_view`` request sends ``COMMIT``?

A structural measure of the request path, not a timing: for one decorated,
idempotent, audited ``POST`` (the ``Idempotency-Key`` header, the default
optimistic lock, audit on) it records, at the moment redis-py is asked to
send the ``COMMIT`` script:

* the django-xsm frames live on the Python stack (outermost first), and
  the distinct modules they belong to;
* the sans-I/O loops live: how many distinct django-xsm generators are
  suspended in the locals of those frames, each waiting for its driver to
  bring a reply (nested driver loops; a generator delegated to with
  ``yield from`` counts with the one delegating to it);
* every django-xsm module a function of which ran between the request's
  start and that moment (``sys.setprofile``; for the async view, the event
  loop's thread).

Three requests of the test project (``tests/django``): the key-based
``@stateful_view("ticket", key="ticket:{tid}")`` view ``bump``, the
model-bound ``@stateful_view(model=Order)`` view ``pay`` and the async view
``abump``, each after one warm-up request (connections, scripts, the schema
marker). The ``COMMIT`` script is recognised by the SHA1 of its source,
``django_xsm.redis.scripts.COMMIT`` (``docs/redis.md``), sent with
``EVALSHA`` (or ``EVAL`` with the source after ``NOSCRIPT``).

Usage (from the repository root)::

    python bench/request_path.py                                  # embedded fakeredis
    python bench/request_path.py --redis-url redis://127.0.0.1:6379/15
    python bench/request_path.py --json request-path.json

On a real server the probe uses a fresh prefix and deletes exactly its own
keys at the end (never ``FLUSHDB``). ``tests/django/test_request_path.py``
runs :func:`probe` and :func:`aprobe` and bounds the frame counts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import inspect
import json
import os
import sys
import types
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["CommitPath", "Frame", "ProbeError", "aprobe", "commit_script", "probe"]


class ProbeError(RuntimeError):
    """The probe could not observe the request's ``COMMIT``."""


@dataclass(frozen=True)
class Frame:
    """One django-xsm frame: module path inside the package, line, function."""

    module: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} {self.function}"


@dataclass
class CommitPath:
    """What was live when one request sent ``COMMIT``."""

    label: str
    status: int
    frames: list[Frame]
    all_frames: int
    loops: int
    modules_entered: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        """django-xsm frames live at ``COMMIT``."""
        return len(self.frames)

    @property
    def modules_live(self) -> list[str]:
        return sorted({f.module for f in self.frames})

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["frames"] = [str(f) for f in self.frames]
        out["count"] = self.count
        out["modules_live"] = self.modules_live
        return out


def _package_dir() -> str:
    import django_xsm

    return os.path.realpath(os.path.dirname(django_xsm.__file__)) + os.sep


def commit_script() -> tuple[str, str]:
    """``(sha1, source)`` of the ``COMMIT`` script, as ``EVALSHA`` names it."""
    try:
        from django_xsm.redis import scripts

        source = scripts.COMMIT
    except (ImportError, AttributeError) as exc:
        raise ProbeError(
            "cannot find the COMMIT script: bench/request_path.py reads it from "
            "django_xsm.redis.scripts.COMMIT (docs/redis.md, 'Lua scripts'); if the "
            f"scripts moved, update commit_script() there ({exc})"
        ) from exc
    if not isinstance(source, str) or not source.strip():
        raise ProbeError("django_xsm.redis.scripts.COMMIT is not the script's Lua source")
    return hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest(), source


class _Watch:
    """Patches redis-py's clients (blocking and asyncio, and their
    pipelines) to take the stack at the first ``COMMIT`` they are asked to
    send while :attr:`armed`."""

    def __init__(self) -> None:
        self.sha, self.source = commit_script()
        self.package = _package_dir()
        self.armed = False
        self.stack: list[Frame] | None = None
        self.all_frames = 0
        self.loops = 0
        self.scripts_seen: set[str] = set()
        self.entered: set[str] = set()
        self._ours: dict[str, str | None] = {}

    def module_of(self, filename: str) -> str | None:
        """``filename``'s path inside the package, or None if not ours."""
        try:
            return self._ours[filename]
        except KeyError:
            real = os.path.realpath(filename)
            found = real[len(self.package) :] if real.startswith(self.package) else None
            if found is not None:
                found = found.replace(os.sep, "/")
            self._ours[filename] = found
            return found

    def seen(self, args: tuple[Any, ...]) -> None:
        if not self.armed or self.stack is not None or len(args) < 2:
            return
        name = args[0].upper() if isinstance(args[0], str) else args[0]
        if name not in ("EVALSHA", "EVAL", b"EVALSHA", b"EVAL"):
            return
        script = args[1].decode() if isinstance(args[1], bytes) else str(args[1])
        if script in (self.sha, self.source):
            stack = []
            frame = sys._getframe(2)  # the caller of the patched method
            while frame is not None:
                stack.append(frame)
                frame = frame.f_back
            stack.reverse()
            ours = [f for f in stack if self.module_of(f.f_code.co_filename) is not None]
            # taken now: once the request is over the frames have moved on
            self.stack = [self._frame(f) for f in ours]
            self.all_frames = len(stack)
            self.loops = self._suspended_generators(ours)
        elif name in ("EVALSHA", b"EVALSHA"):
            self.scripts_seen.add(script[:12])
        else:
            self.scripts_seen.add(
                hashlib.sha1(script.encode(), usedforsecurity=False).hexdigest()[:12]
            )

    def profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and self.stack is None:
            module = self.module_of(frame.f_code.co_filename)
            if module is not None:
                self.entered.add(module)

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        import redis.asyncio.client
        import redis.client

        sync_classes = (redis.client.Redis, redis.client.Pipeline)
        async_classes = (redis.asyncio.client.Redis, redis.asyncio.client.Pipeline)
        saved: list[tuple[type, Any]] = []
        watch = self

        def wrap_sync(original: Any) -> Any:
            def execute_command(self: Any, *args: Any, **options: Any) -> Any:
                watch.seen(args)
                return original(self, *args, **options)

            return execute_command

        def wrap_async(original: Any) -> Any:
            # a pipeline's execute_command only queues (not a coroutine)
            if not inspect.iscoroutinefunction(original):
                return wrap_sync(original)

            async def execute_command(self: Any, *args: Any, **options: Any) -> Any:
                watch.seen(args)
                return await original(self, *args, **options)

            return execute_command

        try:
            for classes, wrap in ((sync_classes, wrap_sync), (async_classes, wrap_async)):
                for cls in classes:
                    original = cls.__dict__["execute_command"]
                    saved.append((cls, original))
                    setattr(cls, "execute_command", wrap(original))  # noqa: B010
            yield
        finally:
            for cls, original in saved:
                setattr(cls, "execute_command", original)  # noqa: B010

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Arm the watch and the profiler for one request."""
        self.stack, self.entered = None, set()
        self.armed = True
        previous = sys.getprofile()
        sys.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(previous)
            self.armed = False

    def result(self, label: str, status: int) -> CommitPath:
        if self.stack is None:
            seen = ", ".join(sorted(self.scripts_seen)) or "none"
            raise ProbeError(
                f"{label}: the request (HTTP {status}) sent no COMMIT (EVALSHA "
                f"{self.sha[:12]}...; other scripts seen: {seen}). If the way scripts are "
                "called changed, update bench/request_path.py"
            )
        path = CommitPath(
            label=label,
            status=status,
            frames=self.stack,
            all_frames=self.all_frames,
            loops=self.loops,
            modules_entered=sorted(self.entered),
        )
        self.stack = None
        return path

    def _frame(self, frame: types.FrameType) -> Frame:
        module = self.module_of(frame.f_code.co_filename)
        assert module is not None
        return Frame(module, frame.f_lineno, frame.f_code.co_qualname)

    def _suspended_generators(self, frames: list[types.FrameType]) -> int:
        """Distinct django-xsm generators suspended in these frames' locals,
        a ``yield from`` chain counted once: the sans-I/O loops live."""
        found: dict[int, types.GeneratorType[Any, Any, Any]] = {}
        for frame in frames:
            for value in list(frame.f_locals.values()):
                if (
                    isinstance(value, types.GeneratorType)
                    and inspect.getgeneratorstate(value) == inspect.GEN_SUSPENDED
                    and self.module_of(value.gi_code.co_filename) is not None
                ):
                    found[id(value)] = value
        delegated: set[int] = set()
        for gen in found.values():
            inner = gen.gi_yieldfrom
            while isinstance(inner, types.GeneratorType):
                delegated.add(id(inner))
                inner = inner.gi_yieldfrom
        return len(set(found) - delegated)


def probe(label: str, send: Callable[[], Any]) -> CommitPath:
    """Run ``send()`` (one request through Django's test client) and return
    what was live when it sent ``COMMIT``; :class:`ProbeError` if it sent
    none."""
    watch = _Watch()
    with watch.patched():
        with watch.request():
            response = send()
        return watch.result(label, response.status_code)


async def aprobe(label: str, send: Callable[[], Awaitable[Any]]) -> CommitPath:
    """:func:`probe` for a request through Django's ``AsyncClient``."""
    watch = _Watch()
    with watch.patched():
        with watch.request():
            response = await send()
        return watch.result(label, response.status_code)


# --- the command ---------------------------------------------------------------------


def _setup_django(redis_url: str | None, prefix: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django.settings"
    from tests.django import settings

    xsm = dict(settings.XSM)
    xsm["PREFIX"] = prefix
    if redis_url:
        xsm.update(EMBEDDED=False, REDIS_URL=redis_url)
    settings.XSM = xsm
    settings.ROOT_URLCONF = "tests.django.fields.urls"  # includes tests.django.urls
    settings.DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()
    call_command("migrate", run_syncdb=True, verbosity=0)


def _run() -> list[CommitPath]:
    from django.test import AsyncClient, Client

    from tests.fieldapp.models import Order

    client = Client()
    tag = uuid.uuid4().hex[:8]
    client.post(f"/t/warm{tag}/bump", HTTP_IDEMPOTENCY_KEY="warm")
    paths = [
        probe(
            "key-based @stateful_view('ticket', key=...)",
            lambda: client.post(f"/t/{tag}/bump", HTTP_IDEMPOTENCY_KEY="k1"),
        )
    ]
    warm, order = Order.objects.create(), Order.objects.create()
    client.post(f"/orders/{warm.pk}/pay", {"amount": "20"}, HTTP_IDEMPOTENCY_KEY="warm")
    paths.append(
        probe(
            "@stateful_view(model=Order)",
            lambda: client.post(
                f"/orders/{order.pk}/pay", {"amount": "20"}, HTTP_IDEMPOTENCY_KEY="k2"
            ),
        )
    )

    async def run_async() -> CommitPath:
        aclient = AsyncClient()
        await aclient.post(f"/t/awarm{tag}/abump", headers={"Idempotency-Key": "warm"})
        return await aprobe(
            "async @stateful_view('ticket', key=...)",
            lambda: aclient.post(f"/t/a{tag}/abump", headers={"Idempotency-Key": "k3"}),
        )

    paths.append(asyncio.run(run_async()))
    return paths


def _delete_prefix(redis_url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _print(paths: list[CommitPath], verbose: bool) -> None:
    print(f"{'request':44} {'frames':>6} {'all':>5} {'loops':>5} {'live mods':>9} {'entered':>7}")
    for p in paths:
        print(
            f"{p.label:44} {p.count:6} {p.all_frames:5} {p.loops:5} "
            f"{len(p.modules_live):9} {len(p.modules_entered):7}"
        )
    for p in paths:
        print(f"\n{p.label}: HTTP {p.status}, {p.count} django-xsm frames at COMMIT")
        for f in p.frames:
            print(f"  {f}")
        if verbose:
            print(f"  modules entered before COMMIT ({len(p.modules_entered)}):")
            for m in p.modules_entered:
                print(f"    {m}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--redis-url",
        help="a real Redis (a fresh prefix, deleted after); default: embedded fakeredis",
    )
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the modules entered")
    a = ap.parse_args(argv)
    prefix = f"reqpath{uuid.uuid4().hex[:8]}"
    _setup_django(a.redis_url, prefix)
    try:
        paths = _run()
    finally:
        if a.redis_url:
            _delete_prefix(a.redis_url, prefix)
    _print(paths, a.verbose)
    if a.json:
        import django_xsm

        report = {
            "backend": "redis" if a.redis_url else "embedded fakeredis",
            "django_xsm": django_xsm.__version__,
            "python": sys.version.split()[0],
            "requests": [p.as_dict() for p in paths],
        }
        Path(a.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
