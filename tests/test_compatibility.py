"""docs/compatibility.md's table is what CI runs: its rows are the legs of
scripts/ci_matrix (same interpreter, Django and redis-py pins, Redis server,
test paths), .ci/run runs them, and the package's metadata claims no more
than they test."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("leg", "python", "django", "redis-py", "server", "marks", "venv", "paths")


def script_legs(text: str) -> dict[str, dict[str, str]]:
    """The LEGS=( ... ) rows of scripts/ci_matrix, by name."""
    block = re.search(r"^LEGS=\(\n(.*?)^\)", text, re.S | re.M)
    assert block is not None, "scripts/ci_matrix has no LEGS=( ... ) block"
    legs = {}
    for row in re.findall(r'^\s*"([^"]+)"\s*$', block.group(1), re.M):
        cells = [c.strip() for c in row.split("|")]
        assert len(cells) == len(FIELDS), row
        legs[cells[0]] = dict(zip(FIELDS, cells, strict=True))
    return legs


def _value(cell: str) -> str:
    """`spec` (what it resolved to) -> spec."""
    return cell.split(" (", 1)[0].replace("`", "").strip()


COLUMNS = {  # the table's column -> the leg's field
    "leg": "leg",
    "python": "python",
    "django": "django",
    "redis-py": "redis-py",
    "redis server": "server",
    "selection": "marks",
    "test paths": "paths",
}


def doc_legs(text: str) -> dict[str, dict[str, str]]:
    """The rows of the table under "## What CI runs", by leg name."""
    section = re.search(r"^## What CI runs\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section is not None, 'docs/compatibility.md has no "## What CI runs" section'
    rows = [line for line in section.group(1).splitlines() if line.startswith("|")]
    header = [c.strip().lower() for c in rows[0].strip().strip("|").split("|")]
    assert set(COLUMNS) <= set(header), header
    legs = {}
    for line in rows[2:]:
        cells = dict(
            zip(header, (c.strip() for c in line.strip().strip("|").split("|")), strict=True)
        )
        leg = {field: _value(cells[column]) for column, field in COLUMNS.items()}
        leg["paths"] = " ".join(re.findall(r"`([^`]+)`", cells["test paths"]))
        legs[leg["leg"]] = leg
    return legs


def test_the_compatibility_table_lists_exactly_the_ci_legs() -> None:
    script = script_legs((ROOT / "scripts/ci_matrix").read_text())
    doc = doc_legs((ROOT / "docs/compatibility.md").read_text())
    assert len(script) >= 5
    assert sorted(doc) == sorted(script)
    for name, leg in script.items():
        for field in ("python", "django", "redis-py", "server", "marks", "paths"):
            assert doc[name][field] == leg[field], (name, field, doc[name][field], leg[field])


def test_every_leg_runs_paths_that_exist() -> None:
    for leg in script_legs((ROOT / "scripts/ci_matrix").read_text()).values():
        missing = [p for p in leg["paths"].split() if not (ROOT / p).exists()]
        assert missing == [], (leg["leg"], missing)


def test_ci_runs_the_matrix_and_the_wheel_check() -> None:
    ci = (ROOT / ".ci/run").read_text()
    commands = [line.strip() for line in ci.splitlines() if not line.lstrip().startswith("#")]
    assert any(line.startswith("scripts/ci_matrix") for line in commands), "no scripts/ci_matrix"
    assert any(line.startswith("scripts/check_wheel") for line in commands), "no check_wheel"


def test_the_package_claims_only_what_the_legs_test() -> None:
    """Every Python and Django classifier has a leg; the oldest redis-py the
    dependencies admit is the one a leg pins."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    legs = script_legs((ROOT / "scripts/ci_matrix").read_text()).values()
    classifiers = project["classifiers"]
    pythons = {c.rsplit(" :: ", 1)[1] for c in classifiers if re.search(r"Python :: 3\.\d+$", c)}
    assert pythons == {leg["python"] for leg in legs}
    djangos = [c.rsplit(" :: ", 1)[1] for c in classifiers if re.search(r"Django :: \d", c)]
    assert djangos
    for version in djangos:
        assert any(SpecifierSet(Requirement(leg["django"]).specifier).contains(version)
                   for leg in legs), version  # fmt: skip
    requires_python = SpecifierSet(project["requires-python"])
    assert all(requires_python.contains(f"{leg['python']}.0") for leg in legs)
    [redis_dep] = [Requirement(d) for d in project["dependencies"] if d.startswith("redis")]
    [lower] = [s.version for s in redis_dep.specifier if s.operator == ">="]
    pins = [Requirement(leg["redis-py"]) for leg in legs if leg["redis-py"] != "newest"]
    assert [str(p.specifier) for p in pins] == [f"=={lower}"], (lower, pins)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("| `main` | 3.11 (3.11.7) | `Django>=5.2,<6` (5.2.19) | newest (8.1.0) | 7.0 (7.0.15) "
         "| all | `tests` | 3 | 1 |",
         {"python": "3.11", "django": "Django>=5.2,<6", "marks": "all", "paths": "tests"}),
        ("| `x` | 3.13 | `Django>=6,<7` | `redis==5.0.1` | 6.2 | `live or fault` "
         "| `tests/a` `tests/b.py` | 1 | 1 |",
         {"redis-py": "redis==5.0.1", "server": "6.2", "marks": "live or fault",
          "paths": "tests/a tests/b.py"}),
    ],
)  # fmt: skip
def test_the_table_parser_reads_specs_and_paths(row: str, expected: dict[str, str]) -> None:
    head = (
        "| leg | Python | Django | redis-py | Redis server | selection | test paths | tests run "
        "| time |\n| - |\n"
    )
    [leg] = doc_legs(f"## What CI runs\n\n{head}{row}\n").values()
    assert {k: leg[k] for k in expected} == expected
