"""The sdist carries the documentation the README links to."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_sdist_ships_every_page_the_readme_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    build_meta = pytest.importorskip("setuptools.build_meta")
    monkeypatch.chdir(ROOT)
    name = build_meta.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as sdist:
        members = {m.split("/", 1)[1] for m in sdist.getnames() if "/" in m}
    linked = set(
        re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]*)?\)", (ROOT / "README.md").read_text())
    )
    assert linked and {p for p in linked if p.startswith("docs/")}
    assert linked <= members, sorted(linked - members)
    assert {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} <= members
