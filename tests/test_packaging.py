"""The sdist carries the documentation the README links to."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tracked_copy(into: Path) -> Path:
    """The repository's tracked files in a fresh directory: no stale
    ``*.egg-info/SOURCES.txt`` (which setuptools would reuse) can hide a
    missing ``MANIFEST.in`` line."""
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return into


def test_the_sdist_ships_every_page_the_readme_links(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    src = _tracked_copy(tmp_path / "src")
    out = tmp_path / "dist"
    out.mkdir()
    code = (
        "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    )
    built = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=src, capture_output=True, text=True, check=True,
    )  # fmt: skip
    name = built.stdout.strip().splitlines()[-1]
    with tarfile.open(out / name) as sdist:
        members = {m.split("/", 1)[1] for m in sdist.getnames() if "/" in m}
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]*)?\)", readme))
    assert {p for p in linked if p.startswith("docs/")}
    assert linked <= members, sorted(linked - members)
    assert {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} <= members
