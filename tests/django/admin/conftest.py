"""Fixtures of the admin tests: users with chosen permissions, seeded
instances, and a client per kind of user (CSRF checks enforced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_xsm.registry import machines

ALL_PERMS = ("view_instance", "send_event", "fire_timers", "forget_instance")
ADMIN = "/admin/django_xsm/instance/"


@pytest.fixture(autouse=True)
def _admin_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.django.admin.urls"


@pytest.fixture
def make_user(db: Any) -> Callable[..., User]:
    """``make_user("bob", "view_instance", staff=True)``."""

    def make(name: str, *perms: str, staff: bool = True, superuser: bool = False) -> User:
        user = User.objects.create_user(name, password="pw", is_staff=staff)
        user.is_superuser = superuser
        user.save()
        for codename in perms:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="django_xsm", codename=codename)
            )
        return User.objects.get(pk=user.pk)  # fresh permission cache

    return make


@pytest.fixture
def client_for(make_user: Callable[..., User]) -> Callable[..., Client]:
    """A logged-in ``Client(enforce_csrf_checks=True)`` for a new user."""

    def build(name: str, *perms: str, staff: bool = True, superuser: bool = False) -> Client:
        client = Client(enforce_csrf_checks=True)
        client.force_login(make_user(name, *perms, staff=staff, superuser=superuser))
        return client

    return build


def seed_ticket(key: str, *, bumps: int = 1, actor: str = "seed", **context: Any) -> None:
    """A ticket instance: created, bumped ``bumps`` times (open, count>0)."""
    with machines["ticket"].objects.open(key, actor=actor, context={"count": 0, **context}) as t:
        for _ in range(bumps):
            t.send("BUMP", reason="seeding")


def post_with_csrf(client: Client, url: str, data: dict[str, Any] | None = None) -> Any:
    """POST as a browser would: GET a page first for the CSRF cookie."""
    client.get("/admin/")  # the logout form sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    return client.post(url, {**(data or {}), "csrfmiddlewaretoken": token})
