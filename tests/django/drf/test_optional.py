"""DRF is optional: nothing outside ``django_xsm.contrib.drf`` imports it,
and the integration works without drf-spectacular."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "tests.django.settings"},
        check=False,
        timeout=120,
    )


def test_the_app_imports_every_module_without_drf() -> None:
    code = """
import importlib, pkgutil, sys
sys.modules["rest_framework"] = None   # importing it now raises ImportError
sys.modules["drf_spectacular"] = None
import django
django.setup()
import django_xsm
names = [m.name for m in pkgutil.walk_packages(django_xsm.__path__, "django_xsm.")
         if not m.name.startswith("django_xsm.contrib.drf")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""
    done = _run(code)
    assert done.returncode == 0, done.stdout + done.stderr
    assert int(done.stdout.strip()) > 50


def test_the_integration_works_without_drf_spectacular() -> None:
    code = """
import sys
sys.modules["drf_spectacular"] = None
import django
django.setup()
import django_xsm.contrib.drf as drf
assert drf.StatechartEventsMixin.events.url_path == "events"
assert "django_xsm.contrib.drf.schema" not in sys.modules
print("ok")
"""
    done = _run(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
