"""What the admin must never do: run markup from the store, show secrets,
show a traceback when Redis is down, or scan the keyspace to list a page."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
import redis.client

from django_xsm.redis import RedisStore
from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, post_with_csrf, seed_ticket

HOSTILE_KEY = '<script>alert("k")</script>'
JS_KEY = "javascript:alert(1)"
HOSTILE_CONTEXT = {
    "note": "<script>window.__xss = 1</script>",
    "homepage": "javascript:alert(document.cookie)",
    "img": '<img src=x onerror="window.__xss=2">',
    "quote": '"><svg onload=alert(1)>',
}
JAVASCRIPT_HREF = re.compile(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)


def assert_inert(html: str) -> None:
    assert "<script>window.__xss" not in html
    assert '<script>alert("k")' not in html
    assert "<img src=x" not in html
    assert "<svg onload" not in html
    assert not JAVASCRIPT_HREF.search(html)
    # the only <script> tags are the admin's own (src=... static files)
    for tag in re.findall(r"<script[^>]*>", html):
        assert "src=" in tag or tag == "<script>", tag


@pytest.fixture
def root(backend: Any, client_for: Any) -> Any:
    return client_for("root", superuser=True)


def test_hostile_context_keys_and_log_fields_render_inert(root: Any) -> None:
    for key in (HOSTILE_KEY, JS_KEY, "plain:1"):
        seed_ticket(key, **HOSTILE_CONTEXT)
        machines["ticket"].objects.send(
            key,
            "BUMP",
            actor='<b onmouseover="x()">mallory</b>',
            reason="<script>window.__xss=3</script>",
            correlation_id="javascript:void(0)",
            link="javascript:alert(2)",
        )
    pages = [ADMIN, f"{ADMIN}m/ticket/", f"{ADMIN}m/ticket/?q=%3Cscript"]
    for key in (HOSTILE_KEY, JS_KEY, "plain:1"):
        pages += [
            f"{ADMIN}m/ticket/instance/?key={key}",
            f"{ADMIN}m/ticket/forget/?key={key}",
            f"{ADMIN}m/ticket/send/?key={key}",
        ]
    for url in pages:
        response = root.get(url, {"key": HOSTILE_KEY} if "?" not in url else None)
        assert response.status_code == 200, url
        assert_inert(response.content.decode())
    html = root.get(f"{ADMIN}m/ticket/instance/", {"key": HOSTILE_KEY}).content.decode()
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in html
    assert "javascript:alert(document.cookie)" in html  # shown as text, never as a link
    assert "&lt;b onmouseover=&quot;x()&quot;&gt;mallory&lt;/b&gt;" in html
    preview = post_with_csrf(
        root,
        f"{ADMIN}m/ticket/send/?key=plain:1",
        {"event": "BUMP", "payload": '{"x": "<script>window.__xss=4</script>"}'},
    )
    assert preview.status_code == 200
    assert_inert(preview.content.decode())


def test_a_hostile_state_name_cannot_inject_markup_into_the_diagram() -> None:
    from django_xsm.admin.diagram import render_svg
    from django_xsm.engine import create_machine

    machine = create_machine(
        {
            "id": "evil",
            "initial": "<script>a()</script>",
            "states": {
                "<script>a()</script>": {"on": {'"><img src=x>': "x&y"}},
                "x&y": {},
            },
        }
    )
    svg = str(render_svg(machine, machine.start().state_ids))
    assert "<script>" not in svg and "<img" not in svg
    assert "&lt;script&gt;a()&lt;/script&gt;" in svg and "x&amp;y" in svg


def test_context_is_redacted_like_the_transition_log(root: Any, xsm: Any) -> None:
    xsm(AUDIT={"REDACT": ["nickname"]})  # on top of the backend's settings
    seed_ticket(
        "r:1",
        password="hunter2",
        card_number="4111111111111111",
        profile={"api_token": "tok-123", "nick_name": "zed", "city": "Oslo"},
        items=[{"cvv": "cvv-xyz"}],
    )
    machines["ticket"].objects.send("r:1", "BUMP", password="pw-in-payload")
    html = root.get(f"{ADMIN}m/ticket/instance/", {"key": "r:1"}).content.decode()
    for secret in ("hunter2", "4111111111111111", "tok-123", "zed", "cvv-xyz", "pw-in-payload"):
        assert secret not in html
    assert "[redacted]" in html and "Oslo" in html


# --- store unavailable -----------------------------------------------------------------

DOWN_PAGES = [
    f"{ADMIN}",
    f"{ADMIN}m/ticket/",
    f"{ADMIN}m/ticket/instance/?key=k:1",
    f"{ADMIN}find/?key=k:1",
    f"{ADMIN}m/ticket/send/?key=k:1",
    f"{ADMIN}m/ticket/forget/?key=k:1",
]
DOWN_POSTS = [
    (f"{ADMIN}m/ticket/send/?key=k:1", {"event": "BUMP", "step": "apply", "version": "1"}),
    (f"{ADMIN}m/ticket/fire/?key=k:1", {"force": "1"}),
    (f"{ADMIN}m/ticket/forget/?key=k:1", {}),
]


@pytest.fixture
def store_down(xsm: Any, client_for: Any) -> Any:
    # Nothing listens on port 1: every Redis call fails at once.
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    return client_for("root", superuser=True)


def assert_plain_503(response: Any) -> None:
    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    html = response.content.decode()
    assert "The XSM state store is unavailable right now" in html
    assert "Traceback" not in html and "redis://" not in html and "Error" not in html


@pytest.mark.parametrize("url", DOWN_PAGES)
def test_pages_say_the_store_is_unavailable_with_503(store_down: Any, url: str) -> None:
    assert_plain_503(store_down.get(url))


@pytest.mark.parametrize(("url", "data"), DOWN_POSTS)
def test_actions_say_the_store_is_unavailable_with_503(
    store_down: Any, url: str, data: Any
) -> None:
    assert_plain_503(post_with_csrf(store_down, url, data))


def test_the_admin_index_still_works_when_the_store_is_down(store_down: Any) -> None:
    assert store_down.get("/admin/").status_code == 200


def test_permissions_are_checked_before_the_store(xsm: Any, client_for: Any) -> None:
    xsm(REDIS_URL="redis://127.0.0.1:1/0", EMBEDDED=None, SOCKET_TIMEOUT_S=0.5)
    reader = client_for("reader", "view_instance")
    assert post_with_csrf(reader, f"{ADMIN}m/ticket/forget/?key=k:1").status_code == 403


# --- listing never scans -----------------------------------------------------------------

SCANS = {"SCAN", "KEYS", "HSCAN", "ZSCAN", "SSCAN"}


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Counts store calls and records every command name sent."""
    seen: dict[str, Any] = {"list_page": 0, "load": 0, "commands": []}
    list_page, load = RedisStore.list_page, RedisStore.load
    direct, piped = redis.Redis.execute_command, redis.client.Pipeline.execute_command

    def counting_list_page(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["list_page"] += 1
        return list_page(self, *args, **kwargs)

    def counting_load(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["load"] += 1
        return load(self, *args, **kwargs)

    def record(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["commands"].append(str(args[0]).upper())
        return direct(self, *args, **kwargs)

    def record_piped(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["commands"].append(str(args[0]).upper())
        return piped(self, *args, **kwargs)

    monkeypatch.setattr(RedisStore, "list_page", counting_list_page)
    monkeypatch.setattr(RedisStore, "load", counting_load)
    monkeypatch.setattr(redis.Redis, "execute_command", record)
    monkeypatch.setattr(redis.client.Pipeline, "execute_command", record_piped)
    return seen


def test_a_list_page_costs_one_index_read_plus_one_load_per_row(
    root: Any, spy: dict[str, Any], round_trips: Any
) -> None:
    def page_cost(url: str) -> tuple[int, int, int, list[str]]:
        spy.update(list_page=0, load=0, commands=[])
        with round_trips as rt:
            response = root.get(url)
        assert response.status_code == 200
        return spy["list_page"], spy["load"], rt.count, list(spy["commands"])

    for i in range(30):
        seed_ticket(f"n:{i:03d}")
    root.get(f"{ADMIN}m/ticket/?limit=10")  # warm the script cache
    small = page_cost(f"{ADMIN}m/ticket/?limit=10&after=n:004")
    for i in range(30, 150):
        seed_ticket(f"n:{i:03d}")
    large = page_cost(f"{ADMIN}m/ticket/?limit=10&after=n:004")
    assert small[:2] == large[:2] == (1, 10)
    assert small[2] == large[2] <= 12  # one pipelined index read + one HGETALL per row
    for commands in (small[3], large[3]):
        assert not SCANS & set(commands), commands
    filtered = page_cost(f"{ADMIN}m/ticket/?limit=10&state=ticket.open&q=n:1")
    assert filtered[:2] == (1, 10) and not SCANS & set(filtered[3])
