"""Live pages in headless Chromium: the admin's instance page and the demo's
order page follow their instance through an EventSource, and move when
another server process commits. uvicorn serves the pages watched, gunicorn
the commits (or the other tab); both share a redis-server and a SQLite file
this module starts and creates. Screenshots before and after."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redis.servers import RedisServer, needs_redis_server
from tests.stream.servers import ROOT, Server, environment, migrate, request, running

pytestmark = [pytest.mark.e2e, pytest.mark.fault, needs_redis_server, pytest.mark.timeout(240)]

pytest.importorskip("uvicorn")
pytest.importorskip("gunicorn")


class Site:
    def __init__(self, pages: Server, other: Server) -> None:
        self.pages = pages  # uvicorn: what the browser watches
        self.other = other  # gunicorn: another process that commits


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    folder = Path(tempfile.mkdtemp(prefix="xsm-live-e2e-"))
    (folder / "redis").mkdir()
    server = RedisServer(directory=folder / "redis").start()
    env = environment(
        server.url,
        "xsmtest-live-e2e",
        folder / "db.sqlite3",
        XSM_TEST_PERMISSION="testproject.orders.views.may_follow",
    )
    try:
        migrate(env)
        subprocess.run(
            [sys.executable, "-m", "django", "shell", "-c", MAKE_STAFF],
            env=env,
            cwd=ROOT,
            check=True,
            timeout=120,
        )
        with running(Server("uvicorn", env), Server("gunicorn", env)) as (pages, other):
            yield Site(pages, other)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


MAKE_STAFF = """
from django.contrib.auth.models import Permission, User
user = User.objects.create_user("olga", password="secret-pw", is_staff=True)
user.user_permissions.add(
    Permission.objects.get(content_type__app_label="django_xsm", codename="view_instance")
)
"""


def post(server: Server, path: str, body: Any = None) -> Any:
    status, _, raw = request(
        server,
        "POST",
        path,
        body=json.dumps(body or {}).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex},
    )
    assert status in (200, 201), (status, raw[:300])
    return json.loads(raw)


def test_the_admin_instance_page_follows_commits_of_another_process(
    site: Site, page: Any, shot: Any
) -> None:
    tid = uuid.uuid4().hex[:8]
    post(site.other, f"/t/{tid}/bump")
    post(site.other, f"/t/{tid}/bump")
    base = site.pages.base
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "olga")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")
    page.goto(f"{base}/admin/django_xsm/instance/m/ticket/instance/?key=ticket:{tid}")
    page.wait_for_selector("#xsm-live[data-state=live]")
    assert page.locator("#xsm-state-value").inner_text() == "open"
    assert page.locator("#xsm-timeline tr.xsm-log-row").count() == 2
    assert page.locator("#xsm-diagram [data-state-id$='.open'].xsm-active").count() == 1
    shot("before")

    post(site.other, f"/t/{tid}/close")  # through the other server process

    page.wait_for_function(
        "() => document.getElementById('xsm-state-value').textContent.trim() === 'closed'"
    )
    page.wait_for_selector("#xsm-timeline tr.xsm-log-row[data-seq='3']")
    assert page.locator("#xsm-version").inner_text() == "3"
    assert page.locator("#xsm-diagram [data-state-id$='.closed'].xsm-active").count() == 1
    assert page.locator("#xsm-diagram [data-state-id$='.open'].xsm-active").count() == 0
    assert "CLOSE" in page.locator("#xsm-timeline tr[data-seq='3']").inner_text()
    assert page.locator("#xsm-live").get_attribute("data-state") == "live"
    shot("after")


def test_a_payment_in_one_tab_moves_the_order_page_in_the_other(
    site: Site, page: Any, shot: Any
) -> None:
    order = post(
        site.other, "/api/orders", {"items": [{"sku": "lamp", "qty": 1, "price_cents": 4200}]}
    )
    post(site.other, f"/api/orders/{order['id']}/checkout")

    watching = page  # served by uvicorn
    watching.goto(f"{site.pages.base}/orders/{order['id']}/")
    watching.wait_for_selector("#live[data-state=live]")
    assert watching.locator("#state").inner_text() == "awaiting_payment"
    shot("watching-before")

    paying = watching.context.new_page()  # the other tab, served by gunicorn
    paying.goto(f"{site.other.base}/orders/{order['id']}/")
    paying.click("text=Simulate payment webhook")
    paying.wait_for_selector("#state:has-text('paid')")

    watching.wait_for_selector("#state:has-text('paid')")  # no reload by the test
    watching.wait_for_selector("#live[data-state=live]")
    assert "PAYMENT_RECEIVED" in watching.locator("#history").inner_text()
    shot("watching-after")
    paying.close()
