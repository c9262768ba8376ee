"""Browser tests: Debian's chromium driven by Playwright, against a live
Django server running in this process.

Nothing is downloaded: Playwright launches ``/usr/bin/chromium`` (override
with ``XSM_CHROMIUM``) through ``executable_path``, with flags that keep it
off the network. Screenshots go to ``$XSM_ARTIFACTS/screenshots`` (default
``artifacts/screenshots`` at the repository root, kept by CI).

The server is Django's ``LiveServerThread`` with the staticfiles handler
(the admin's CSS comes from the apps' ``static/`` folders; no collectstatic)
and the in-memory test database shared with it, as
``StaticLiveServerTestCase`` does. The store is the embedded
fakeredis only (same process, so the server thread sees the same data):
what a browser shows does not depend on which Redis answers, and
tests/django/admin drives every page and action with Django's test client
on fakeredis and on the live server (``XSM_REDIS_URL``).
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_xsm import backend as stores

# The Django-layer fixtures: ``xsm`` and the per-test reset of settings and stores.
from tests.django.conftest import _fresh_state, xsm  # noqa: F401

CHROMIUM = os.environ.get("XSM_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[2]


def screenshot_dir() -> Path:
    base = Path(os.environ.get("XSM_ARTIFACTS") or ROOT / "artifacts")
    folder = base / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def backend(xsm: Any) -> stores.Backend:  # noqa: F811 (the fixture imported above)
    """The process backend on the embedded fakeredis (a unique PREFIX per test)."""
    xsm(PREFIX=f"xsmtest-{uuid.uuid4().hex[:12]}")
    return stores.get_backend()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One chromium per test module.

    Playwright's sync API keeps an asyncio loop running in this thread
    while it is open, which Django reads as "called from async code" and
    refuses ORM calls (the tests create users); Django's documented escape
    hatch, ``DJANGO_ALLOW_ASYNC_UNSAFE``, is set for exactly that span. The
    module scope ends the loop before other modules' (async) tests run.
    """
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium; scripts/test does it)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with playwright_api.sync_playwright() as playwright:
            found = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS
            )
            try:
                yield found
            finally:
                found.close()


@pytest.fixture
def live_admin(transactional_db: Any, settings: Any) -> Iterator[str]:
    """Base URL of a live server with the admin at ``/admin/``."""
    yield from _live_server(settings, "tests.django.admin.urls")


@pytest.fixture
def live_demo(transactional_db: Any, settings: Any) -> Iterator[str]:
    """Base URL of a live server with the demo project's URLs
    (``testproject.urls``: the order pages, their JSON API, the admin)."""
    yield from _live_server(settings, "testproject.urls")


def _live_server(settings: Any, urlconf: str) -> Iterator[str]:
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.db import connections
    from django.test.testcases import LiveServerThread

    settings.ROOT_URLCONF = urlconf
    settings.STATIC_URL = "/static/"
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    shared = {c.alias: c for c in connections.all() if c.vendor == "sqlite" and c.is_in_memory_db()}
    for conn in shared.values():
        conn.inc_thread_sharing()
    thread = LiveServerThread("127.0.0.1", StaticFilesHandler, connections_override=shared)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait(timeout=30)
    if thread.error:
        raise thread.error
    try:
        yield f"http://127.0.0.1:{thread.port}"
    finally:
        thread.terminate()
        # Request threads are daemons the server does not join; one still
        # closing its (shared) connection after sharing ends would raise.
        for worker in threading.enumerate():
            if "process_request_thread" in worker.name:
                worker.join(timeout=5)
        for conn in shared.values():
            conn.dec_thread_sharing()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context and page; network requests leaving
    127.0.0.1 are refused and recorded (the admin must need none)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    outside: list[str] = []

    def only_local(route: Any) -> None:
        url = route.request.url
        if re.match(r"^(http://127\.0\.0\.1:\d+/|data:|about:)", url):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", only_local)
    found = context.new_page()
    found.set_default_timeout(15_000)
    found.outside_requests = outside
    try:
        yield found
    finally:
        context.close()
    assert not outside, f"the page tried to reach the network: {outside}"


def fits_the_width(page: Any) -> dict[str, float]:
    """The page's widths: it must not scroll sideways (``scroll`` <=
    ``inner``)."""
    found: dict[str, float] = page.evaluate(
        "() => ({scroll: document.scrollingElement.scrollWidth, inner: window.innerWidth})"
    )
    return found


@pytest.fixture
def shot(page: Any, request: pytest.FixtureRequest) -> Any:
    """``shot("name")`` saves a full-page screenshot named after the test."""
    test = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")

    def take(name: str) -> Path:
        path = screenshot_dir() / f"{test}--{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
