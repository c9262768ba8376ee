"""Running ``xstate_cases.mjs`` (node + xstate 5.33.3 from ``package-lock.json``).

:func:`missing` says why XState cannot run here (no ``node``, or the
packages not installed: ``npm ci --prefix tests/engine/reference``);
:func:`require` turns that into a pytest skip, or a failure under
``CI=true``, where the reference check must run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SCRIPT = HERE / "xstate_cases.mjs"
PINNED = "5.33.3"


def missing() -> str | None:
    """Why the reference cannot run, or ``None`` when it can."""
    if shutil.which("node") is None:
        return "node is not installed (the XState reference needs node 18+)"
    installed = HERE / "node_modules" / "xstate" / "package.json"
    if not installed.exists():
        return "xstate is not installed: run npm ci --prefix tests/engine/reference"
    version = json.loads(installed.read_text(encoding="utf-8"))["version"]
    if version != PINNED:
        return f"xstate {version} is installed, the reference is {PINNED}: run npm ci"
    return None


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require() -> None:
    """Skip the calling test when XState cannot run (fail under CI=true)."""
    import pytest

    reason = missing()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true but the XState reference cannot run: {reason}")
    pytest.skip(reason)


def start_xstate(cases: list[dict[str, Any]]) -> Callable[[], list[dict[str, Any]]]:
    """Start XState on ``cases`` in a node process; the returned function
    waits for it and returns one result per case (``{"steps": [...]}`` or
    ``{"error": ...}``). The caller can work meanwhile."""
    process = subprocess.Popen(
        ["node", str(SCRIPT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    payload = json.dumps({"cases": cases})

    def results() -> list[dict[str, Any]]:
        stdout, stderr = process.communicate(payload, timeout=600)
        if process.returncode != 0:
            raise RuntimeError(f"{SCRIPT.name} failed ({process.returncode}): {stderr.strip()}")
        output = json.loads(stdout)
        if output["xstate"] != PINNED:
            raise RuntimeError(f"the reference ran xstate {output['xstate']}, not {PINNED}")
        found: list[dict[str, Any]] = output["results"]
        return found

    return results


def run_xstate(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """XState's result for each case (``{"steps": [...]}`` or ``{"error": ...}``)."""
    return start_xstate(cases)()
