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


def test_the_readme_installs_from_the_projects_repository() -> None:
    """No package index has django-xsm: the README installs it from source,
    from the repository pyproject.toml names (its Documentation URL)."""
    import tomllib

    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    docs_url = project["urls"]["Documentation"]
    repository = docs_url.split("/tree/", 1)[0]
    assert repository.startswith("https://github.com/")
    text = README.read_text()
    assert f'pip install "django-xsm[hiredis] @ git+{repository}"' in text
    assert 'pip install ".[hiredis]"' in text
    assert "\npip install django-xsm\n" not in text  # finds nothing on an index
