"""The docs cite real things: every test named in docs/guarantees.md exists,
every file path cited in docs exists, and every doc the README lists is
there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _test_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.update(re.findall(r"def (test_\w+)", path.read_text()))
    contract = ROOT / "tests/persistence/contract.py"
    names.update(re.findall(r"def (test_\w+)", contract.read_text()))
    return names


def test_every_test_cited_on_the_guarantees_page_exists() -> None:
    cited = set(re.findall(r"`(test_\w+)`", (DOCS / "guarantees.md").read_text()))
    assert len(cited) > 40
    assert sorted(cited - _test_names()) == []


def test_every_repository_path_cited_in_the_docs_exists() -> None:
    cited_path = re.compile(r"`((?:tests|django_xsm|bench|scripts|testproject)/[\w/.\-]+)`")
    missing = []
    for doc in [*DOCS.glob("*.md"), ROOT / "README.md"]:
        for path in cited_path.findall(doc.read_text()):
            if not (ROOT / path.rstrip("/")).exists():
                missing.append(f"{doc.name}: {path}")
    assert missing == []


def test_every_page_the_readme_links_exists() -> None:
    links = re.findall(r"\]\((docs/[\w.\-]+\.md)\)", (ROOT / "README.md").read_text())
    assert links
    assert [link for link in links if not (ROOT / link).exists()] == []
