"""How big is the package? Lines of ``django_xsm/``, by package and module.

Counts every ``*.py`` file under ``django_xsm/`` (Lua scripts live in
Python modules, so they count; templates and static files do not). A
line is a line as ``wc -l`` counts it; each is also classified as code,
docstring, comment (a line holding only a comment) or blank. Prints the
total and the module count, a row per package (the first directory under
``django_xsm/``; modules directly in it are "(top level)") and every
module over ``--module-limit`` lines (600: "a module is one concept").

``--exclude GLOB`` (repeatable) leaves out the modules it matches, with
``fnmatch`` rules on the path inside the package (``*`` also matches
``/``), for example ``--exclude 'live/*' --exclude 'testing/*'``; a leading
``django_xsm/`` is ignored. The excluded modules are listed with their
lines.

Usage (from the repository root)::

    python bench/line_budget.py
    python bench/line_budget.py --exclude 'live/*' --json lines.json
    python bench/line_budget.py --max-total 25000    # exit 1 if over, or a module over the limit
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import io
import json
import sys
import tokenize
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("code", "docstring", "comment", "blank")


@dataclass
class Module:
    path: str  # inside the package, with "/"
    lines: int
    code: int
    docstring: int
    comment: int
    blank: int

    @property
    def package(self) -> str:
        head, sep, _ = self.path.partition("/")
        return head + "/" if sep else "(top level)"


def count(path: Path, name: str) -> Module:
    """The lines of one module, by kind."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    comments = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].lstrip().startswith("#")
    }
    blank = {i for i, line in enumerate(lines, 1) if not line.strip()}
    docstrings -= blank
    comments -= blank | docstrings
    return Module(
        path=name,
        lines=len(lines),
        code=len(lines) - len(blank) - len(docstrings) - len(comments),
        docstring=len(docstrings),
        comment=len(comments),
        blank=len(blank),
    )


def scan(package: Path, exclude: list[str]) -> tuple[list[Module], list[Module]]:
    """(counted, excluded) modules of ``package``."""
    patterns = [p.removeprefix("django_xsm/") for p in exclude]
    counted, excluded = [], []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        module = count(path, name)
        if any(fnmatch.fnmatch(name, p) for p in patterns):
            excluded.append(module)
        else:
            counted.append(module)
    return counted, excluded


@dataclass
class Budget:
    total: int
    modules: int
    kinds: dict[str, int]
    packages: dict[str, dict[str, int]]
    over_limit: dict[str, int]


def summary(modules: list[Module], limit: int) -> Budget:
    packages: dict[str, dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(("modules", "lines", *KINDS), 0)
    )
    for m in modules:
        row = packages[m.package]
        row["modules"] += 1
        for kind in ("lines", *KINDS):
            row[kind] += getattr(m, kind)
    return Budget(
        total=sum(m.lines for m in modules),
        modules=len(modules),
        kinds={kind: sum(getattr(m, kind) for m in modules) for kind in KINDS},
        packages=dict(sorted(packages.items(), key=lambda kv: -kv[1]["lines"])),
        over_limit={
            m.path: m.lines for m in sorted(modules, key=lambda m: -m.lines) if m.lines > limit
        },
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", type=Path, default=ROOT / "django_xsm")
    ap.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    ap.add_argument("--module-limit", type=int, default=600)
    ap.add_argument(
        "--max-total", type=int, help="exit 1 above this total, or with a module over the limit"
    )
    ap.add_argument("--json", help="write the figures (and every module) to this file")
    a = ap.parse_args(argv)
    counted, excluded = scan(a.package, a.exclude)
    if not counted:
        ap.error(f"no module found under {a.package}")
    b = summary(counted, a.module_limit)
    print(f"django_xsm/: {b.total} lines in {b.modules} modules")
    print("  " + ", ".join(f"{n} {kind}" for kind, n in b.kinds.items()))
    print(f"\n{'package':22} {'modules':>7} {'lines':>7} " + " ".join(f"{k:>9}" for k in KINDS))
    for name, row in b.packages.items():
        kinds = " ".join(f"{row[k]:9}" for k in KINDS)
        print(f"{name:22} {row['modules']:7} {row['lines']:7} {kinds}")
    print(f"\nmodules over {a.module_limit} lines: {len(b.over_limit)}")
    for path, lines in b.over_limit.items():
        print(f"  {lines:6}  {path}")
    if excluded:
        print(f"\nexcluded ({', '.join(a.exclude)}): {sum(m.lines for m in excluded)} lines")
        for m in excluded:
            print(f"  {m.lines:6}  {m.path}")
    if a.json:
        report = {
            **asdict(b),
            "module_limit": a.module_limit,
            "exclude": a.exclude,
            "excluded": [asdict(m) for m in excluded],
            "every_module": [asdict(m) for m in counted],
        }
        Path(a.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if a.max_total is not None and (b.total > a.max_total or b.over_limit):
        print(
            f"\nover budget: {b.total} lines (at most {a.max_total}), "
            f"{len(b.over_limit)} modules over {a.module_limit} lines"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
