"""The engine is stdlib only: importing it loads no Django or Redis module."""

from __future__ import annotations

import json
import subprocess
import sys

import django_xsm.engine as engine

FORBIDDEN = (
    "django",
    "redis",
    "fakeredis",
    "asgiref",
    "django_xsm.persistence",
    "django_xsm.redis",
)


def test_import_loads_no_django_or_redis() -> None:
    code = "import sys, json; import django_xsm.engine; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = json.loads(out)
    bad = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == []
    # heavy modules are only imported when needed (errors, hashing)
    for lazy in ("difflib", "hashlib", "inspect", "dataclasses"):
        assert lazy not in loaded, lazy


def test_public_names() -> None:
    for name in (
        "create_machine",
        "MachineLogic",
        "Machine",
        "Instance",
        "Receipt",
        "Deadline",
        "Event",
        "ActionCall",
        "TransitionResult",
        "StateNode",
    ):
        assert hasattr(engine, name), name
        assert name in engine.__all__
