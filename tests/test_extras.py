"""An integration imported without its extra says which ``pip install`` to
run. Each case runs in a fresh interpreter where the extra's package is
made unimportable (``sys.modules[name] = None``, what Python does for a
package that is not there), with the project's test settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _import_without(hidden: str, module: str) -> subprocess.CompletedProcess[str]:
    code = f"""
import sys
sys.modules[{hidden!r}] = None
import django
django.setup()
try:
    import {module}
except ImportError as exc:
    print(type(exc).__name__, exc.name, str(exc), sep="|")
else:
    print("imported")
"""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "tests.django.settings"},
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("module", "hidden", "extra", "distribution"),
    [
        ("django_xsm.contrib.drf", "rest_framework", "drf", "djangorestframework"),
        ("django_xsm.contrib.otel", "opentelemetry", "otel", "opentelemetry-api"),
        ("django_xsm.contrib.otel", "opentelemetry.trace", "otel", "opentelemetry-api"),
        (
            "django_xsm.contrib.health_check",
            "health_check",
            "health-check",
            "django-health-check",
        ),
    ],
)
def test_an_integration_without_its_extra_names_the_pip_install(
    module: str, hidden: str, extra: str, distribution: str
) -> None:
    done = _import_without(hidden, module)
    assert done.returncode == 0, done.stdout + done.stderr
    kind, _name, message = done.stdout.strip().split("|", 2)
    assert kind == "ImportError"
    assert message == (
        f'{module} needs {distribution}, which is not installed: pip install "django-xsm[{extra}]"'
    )


def test_an_import_error_inside_an_installed_package_is_passed_on() -> None:
    """A broken installation is not reported as a missing extra."""
    done = _import_without("opentelemetry.context", "django_xsm.contrib.otel")
    assert done.returncode == 0, done.stdout + done.stderr
    kind, name, message = done.stdout.strip().split("|", 2)
    assert kind in ("ImportError", "ModuleNotFoundError") and name == "opentelemetry.context"
    assert "pip install" not in message


@pytest.mark.parametrize(
    "module",
    ["django_xsm.contrib.drf", "django_xsm.contrib.otel", "django_xsm.contrib.health_check"],
)
def test_an_integration_with_its_extra_imports(module: str) -> None:
    done = _import_without("no_such_package_at_all", module)
    assert done.stdout.strip() == "imported", done.stdout + done.stderr
