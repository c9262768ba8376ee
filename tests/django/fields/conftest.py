"""Fixtures of the model-field tests: every test runs on SQLite and, when a
PostgreSQL answers (see ``tests/django/databases.py``), again on it.

Test modules mark themselves ``pytestmark = pytest.mark.django_db(
databases=DB_ALIASES)``; ``alias`` is the database of the parametrised
flavour (rows are created there with ``.using(alias)``).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from tests.django.databases import require_postgres

#: The databases a test may touch: SQLite always, PostgreSQL when configured.
DB_ALIASES = ["default", *(["postgres"] if "postgres" in settings.DATABASES else [])]


@pytest.fixture(params=["default", "postgres"])
def alias(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name not in settings.DATABASES:
        if require_postgres():
            pytest.fail(
                "XSM_REQUIRE_PG=1 but no PostgreSQL answers (see tests/django/databases.py)"
            )
        pytest.skip("no PostgreSQL answers on 127.0.0.1:5432")
    return name


class FieldAppRouter:
    """Sends the model-field test app's rows to one database: for code that
    saves through the router (the admin's add form, a DRF ``create``, a
    model-bound view's lookup), so it runs on SQLite and PostgreSQL."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def _route(self, model: Any) -> str | None:
        return self.alias if model._meta.app_label == "fieldapp" else None

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return self._route(model)

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return self._route(model)


@pytest.fixture
def routed(alias: str, settings: Any) -> str:
    """``alias``, with the router sending the field app's rows there."""
    settings.DATABASE_ROUTERS = [FieldAppRouter(alias)]
    return alias
