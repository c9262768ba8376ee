"""Fixtures of the DRF tests: skipped without djangorestframework (the
``drf`` extra). Modules that create rows use ``views_db``, so they run on
SQLite and PostgreSQL (``alias``, as in tests/django/fields), and
``backend``, so they run on fakeredis and a live Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("rest_framework")

from rest_framework.test import APIClient

from tests.django.drf import views
from tests.django.fields.conftest import DB_ALIASES, alias, routed  # noqa: F401

__all__ = ["DB_ALIASES"]


@pytest.fixture(autouse=True)
def _views_state() -> Iterator[None]:
    """Hooks and counters of the test viewsets start empty."""
    views.HOOK.clear()
    views.CALLS["perform_event"] = 0
    yield
    views.HOOK.clear()
    views.DATABASE["alias"] = "default"


@pytest.fixture
def views_db(alias: str) -> str:  # noqa: F811
    """The viewsets read rows from the test's database (modules that
    create rows use it, so they run on SQLite and PostgreSQL)."""
    views.DATABASE["alias"] = alias
    return alias


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def refunder(django_user_model: Any) -> Any:
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("rita")
    user.user_permissions.add(Permission.objects.get(codename="refund_order"))
    return django_user_model.objects.get(pk=user.pk)  # no cached permissions
