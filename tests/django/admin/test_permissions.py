"""Who may open which admin page and run which action.

``admin_view`` only checks ``is_staff``: every page checks its own
permissions (403 without them), anonymous users and non-staff get the
admin login, and each write action needs its own permission.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from django_xsm.registry import machines
from tests.django.admin.conftest import ADMIN, post_with_csrf, seed_ticket

KEY = "perm:1"
READ_PAGES = [
    ADMIN,
    f"{ADMIN}m/ticket/",
    f"{ADMIN}m/ticket/instance/?key={KEY}",
    f"{ADMIN}find/?key={KEY}",
]
ACTIONS = {
    # action -> (permission, GET url or None, POST url, POST data)
    "send": (
        "send_event",
        f"{ADMIN}m/ticket/send/?key={KEY}",
        f"{ADMIN}m/ticket/send/?key={KEY}",
        {"event": "BUMP", "payload": "{}", "step": "preview"},
    ),
    "fire": ("fire_timers", None, f"{ADMIN}m/ticket/fire/?key={KEY}", {"force": "1"}),
    "forget": (
        "forget_instance",
        f"{ADMIN}m/ticket/forget/?key={KEY}",
        f"{ADMIN}m/ticket/forget/?key={KEY}",
        {},
    ),
}


@pytest.fixture
def seeded(backend: Any) -> Any:
    seed_ticket(KEY)
    return backend


@pytest.mark.parametrize("url", READ_PAGES + [u for _, u, _, _ in ACTIONS.values() if u])
def test_anonymous_users_get_the_admin_login(seeded: Any, url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


@pytest.mark.parametrize("url", READ_PAGES)
def test_non_staff_users_get_the_admin_login_even_with_the_permission(
    seeded: Any, client_for: Any, url: str
) -> None:
    client = client_for("plain", "view_instance", staff=False)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


@pytest.mark.parametrize("url", READ_PAGES)
def test_staff_without_view_permission_get_403(seeded: Any, client_for: Any, url: str) -> None:
    assert client_for("nobody").get(url).status_code == 403


def test_the_xsm_section_is_listed_only_for_users_who_may_view(
    seeded: Any, client_for: Any
) -> None:
    index = client_for("reader", "view_instance").get("/admin/")
    assert index.status_code == 200
    assert b'href="/admin/django_xsm/instance/"' in index.content
    assert b"XSM" in index.content
    other = client_for("nobody").get("/admin/")
    assert b"/admin/django_xsm/instance/" not in other.content


@pytest.mark.parametrize("url", READ_PAGES)
def test_read_only_staff_can_browse(seeded: Any, client_for: Any, url: str) -> None:
    response = client_for("reader", "view_instance").get(url, follow=True)
    assert response.status_code == 200


def test_read_only_staff_see_no_action_controls(seeded: Any, client_for: Any) -> None:
    page = client_for("reader", "view_instance").get(f"{ADMIN}m/ticket/instance/?key={KEY}")
    html = page.content.decode()
    assert 'id="xsm-actions"' not in html
    for marker in ("xsm-send", "xsm-fire", "xsm-forget", "/send/", "/fire/", "/forget/"):
        assert marker not in html


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_read_only_staff_change_nothing(seeded: Any, client_for: Any, action: str) -> None:
    _perm, get_url, post_url, data = ACTIONS[action]
    client = client_for("reader", "view_instance")
    if get_url:
        assert client.get(get_url).status_code == 403
    assert post_with_csrf(client, post_url, data).status_code == 403
    view = machines["ticket"].objects.get(KEY)
    assert (view.value, view.version) == ("open", 1)
    assert len(machines["ticket"].objects.history(KEY)) == 1
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("granted", sorted(ACTIONS))
def test_each_action_needs_its_own_permission(
    seeded: Any, client_for: Any, action: str, granted: str
) -> None:
    _perm, get_url, post_url, data = ACTIONS[action]
    client = client_for("operator", "view_instance", ACTIONS[granted][0])
    response = post_with_csrf(client, post_url, data)
    if granted == action:
        assert response.status_code in (200, 302)
        if get_url:
            assert client.get(get_url).status_code in (200, 404)
    else:
        assert response.status_code == 403
        if get_url:
            assert client.get(get_url).status_code == 403


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_write_permission_without_view_permission_is_not_enough(
    seeded: Any, client_for: Any, action: str
) -> None:
    perm, _get_url, post_url, data = ACTIONS[action]
    client = client_for("blind", perm)
    assert post_with_csrf(client, post_url, data).status_code == 403
    assert client.get(f"{ADMIN}m/ticket/instance/?key={KEY}").status_code == 403


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_every_action_refuses_a_post_without_a_csrf_token(
    seeded: Any, client_for: Any, action: str
) -> None:
    _perm, _get, post_url, data = ACTIONS[action]
    client = client_for("root", superuser=True)
    response = client.post(post_url, data)
    assert response.status_code == 403
    assert b"CSRF" in response.content
    view = machines["ticket"].objects.get(KEY)
    assert (view.value, view.version) == ("open", 1)
    assert not LogEntry.objects.exists()


def test_superusers_hold_every_permission(seeded: Any, client_for: Any) -> None:
    client = client_for("root", superuser=True)
    html = client.get(f"{ADMIN}m/ticket/instance/?key={KEY}").content.decode()
    for marker in ("xsm-send", "xsm-fire", "xsm-forget"):
        assert marker in html


def test_fire_answers_get_with_405(seeded: Any, client_for: Any) -> None:
    client = client_for("firer", "view_instance", "fire_timers")
    assert client.get(f"{ADMIN}m/ticket/fire/?key={KEY}").status_code == 405


def test_the_admin_add_change_delete_machinery_stays_off(seeded: Any, client_for: Any) -> None:
    client = client_for("root", superuser=True)
    index = client.get("/admin/").content.decode()
    assert "/admin/django_xsm/instance/add/" not in index
    assert client.get(f"{ADMIN}add/").status_code == 404
