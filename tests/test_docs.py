"""The docs cite real things: every test named in docs/guarantees.md and
docs/engine.md exists, every file path cited in docs exists, and every doc
the README lists is there."""

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


def test_every_test_cited_on_the_engine_page_exists() -> None:
    """docs/engine.md names the test that pins each difference from XState."""
    cited = set(re.findall(r"`(test_\w+)`", (DOCS / "engine.md").read_text()))
    assert len(cited) >= 8
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


def _code_blocks(*languages: str) -> list[tuple[str, str]]:
    """(file name, body) of every fenced block in these languages in the
    docs and the README."""
    fence = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
    return [
        (doc.name, body)
        for doc in [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
        for language, body in fence.findall(doc.read_text(encoding="utf-8"))
        if language in languages
    ]


def test_shell_blocks_paste_into_a_terminal() -> None:
    """ASCII only: a typographic ellipsis, dash or quote in a command or a
    header value breaks it when pasted (curl sends the bytes verbatim)."""
    blocks = _code_blocks("bash", "sh", "shell", "console")
    assert len(blocks) > 10
    bad = [
        f"{name}: {line.strip()}"
        for name, body in blocks
        for line in body.splitlines()
        if not line.isascii()
    ]
    assert bad == []


def test_python_blocks_import_the_modules_they_use() -> None:
    """A settings snippet that reads ``os.environ`` imports ``os``."""
    blocks = _code_blocks("python")
    missing = [
        f"{name}: {body.splitlines()[0]}"
        for name, body in blocks
        if re.search(r"\bos\.(environ|getenv|path)\b", body)
        and not re.search(r"^import os$", body, re.M)
    ]
    assert missing == []
