"""Fixtures of the model-field tests: every test runs on SQLite and, when a
PostgreSQL answers (see ``tests/django/databases.py``), again on it.

Test modules mark themselves ``pytestmark = pytest.mark.django_db(
databases=DB_ALIASES)``; ``alias`` is the database of the parametrised
flavour (rows are created there with ``.using(alias)``).
"""

from __future__ import annotations

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
