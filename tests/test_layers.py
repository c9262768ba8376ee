"""Layer rules beyond import-linter's contracts (docs/architecture.md).

import-linter (run by .ci/run) keeps the layers pointing down; this test
adds that the Django glue uses only the public names of the layers below:
``django_xsm.redis`` and ``django_xsm.persistence`` packages and their
documented public modules, never the Redis layer's internals (drivers,
script texts, key layout, call builders).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_xsm"
LOWER = ("engine", "persistence", "redis")
REDIS_INTERNALS = {
    "django_xsm.redis.core",
    "django_xsm.redis.calls",
    "django_xsm.redis.client",
    "django_xsm.redis.keys",
    "django_xsm.redis.errors",
    "django_xsm.redis.scripts",
}


def _glue_modules() -> list[Path]:
    return [
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] not in LOWER and "migrations" not in p.parts
    ]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_glue_uses_no_redis_layer_internals() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            m for m in _imports(path) if any(m.startswith(i) for i in REDIS_INTERNALS)
        )
        for path in _glue_modules()
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(offenders) > 15  # the glue is really being looked at


def test_the_lower_layers_import_without_django_settings() -> None:
    code = (
        "import sys, django_xsm.engine, django_xsm.persistence, django_xsm.redis, "
        "django_xsm.exceptions, django_xsm.brief; "
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_errors_and_brief_import_nothing_of_the_project_but_brief() -> None:
    """Every layer raises the errors and prints values with brief(): they
    import nothing of the project, except the errors importing brief."""
    found = {
        name: sorted(m for m in _imports(PACKAGE / f"{name}.py") if m.startswith("django"))
        for name in ("exceptions", "brief")
    }
    assert found == {"exceptions": ["django_xsm.brief"], "brief": []}
