"""The README's examples run as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_twenty_line_example_runs_and_prints_what_it_says() -> None:
    text = README.read_text()
    code = re.search(r"## Twenty lines\n\n```python\n(.*?)```", text, re.S)
    assert code is not None
    lines = code.group(1).strip().splitlines()
    assert len(lines) <= 21
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(README), "exec"), {})
    assert out.getvalue().strip() == "2 ['ADD', 'PAY']"


def test_the_readme_names_the_two_setup_commands() -> None:
    text = README.read_text()
    for command in ("scripts/demo", "scripts/test"):
        assert command in text
        assert (README.parent / command).exists()
