"""Repeated blocks in ``django_xsm/``: where the same code is written twice.

A *repeated-block pair* is two places in the package (two modules, or two
places in one module) where the same ``--window`` (5) or more consecutive
code lines occur. How it is counted:

1. Each module's lines are stripped of indentation. Left out: blank lines,
   comment-only lines, docstrings, ``import`` statements and lines that
   say nothing alone (``)``, ``]``, ``}``, ``),``, ``],``, ``):``,
   ``\"\"\"``, ``else:``, ``try:``, ``return``, ``pass``). Lua scripts are
   Python strings and count as code.
2. Every run of ``--window`` consecutive remaining lines is a window;
   windows with the same text at two places form a pair of places (three
   places: three pairs). Windows that overlap in one module do not pair.
3. Consecutive windows of one pair of places (both sides one line further)
   are one block: a pair counts once however long the repeated block is.

Usage (from the repository root)::

    python bench/repeated_blocks.py                 # the count at 5 lines
    python bench/repeated_blocks.py -v              # and every pair
    python bench/repeated_blocks.py --window 6 --exclude 'migrations/*'

``--exclude`` takes ``fnmatch`` globs on the path inside the package, as
``bench/line_budget.py`` does.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALONE = frozenset({")", "]", "}", "),", "],", "):", '"""', "else:", "try:", "return", "pass"})

Place = tuple[str, int]  # (module inside the package, index of its first code line)


def code_lines(source: str) -> list[tuple[int, str]]:
    """``(line number, stripped text)`` of the lines that count."""
    lines = source.splitlines()
    skip: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        elif isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                skip.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].lstrip().startswith("#"):
            skip.add(tok.start[0])
    return [
        (number, text)
        for number, text in ((i, line.strip()) for i, line in enumerate(lines, 1))
        if text and number not in skip and text not in ALONE
    ]


def find(package: Path, window: int, exclude: list[str]) -> list[tuple[Place, Place, int]]:
    """Every repeated-block pair: ``(first place, second place, length in
    code lines)``, places as ``(module, first line number)``."""
    patterns = [p.removeprefix("django_xsm/") for p in exclude]
    modules: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if not any(fnmatch.fnmatch(name, p) for p in patterns):
            modules[name] = code_lines(path.read_text(encoding="utf-8"))
    at: dict[str, list[Place]] = defaultdict(list)
    for name, lines in modules.items():
        for j in range(len(lines) - window + 1):
            at["\n".join(text for _, text in lines[j : j + window])].append((name, j))
    pairs: set[tuple[Place, Place]] = set()
    for places in at.values():
        for i, a in enumerate(places):
            for b in places[i + 1 :]:
                if a[0] == b[0] and abs(a[1] - b[1]) < window:
                    continue  # overlapping windows of one module
                pairs.add((a, b) if a < b else (b, a))
    found = []
    for a, b in sorted(pairs):
        if ((a[0], a[1] - 1), (b[0], b[1] - 1)) in pairs:
            continue  # the continuation of a block already counted
        length = window
        while ((a[0], a[1] + length - window + 1), (b[0], b[1] + length - window + 1)) in pairs:
            length += 1
        found.append(
            ((a[0], modules[a[0]][a[1]][0]), (b[0], modules[b[0]][b[1]][0]), length),
        )
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", type=Path, default=ROOT / "django_xsm")
    ap.add_argument("--window", type=int, default=5, help="code lines in a block (5)")
    ap.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every pair")
    ap.add_argument("--json", help="write the pairs to this file")
    a = ap.parse_args(argv)
    pairs = find(a.package, a.window, a.exclude)
    print(f"repeated-block pairs of {a.window}+ code lines under django_xsm/: {len(pairs)}")
    if a.verbose:
        for (fa, la), (fb, lb), length in pairs:
            print(f"  {length:3}  {fa}:{la}  {fb}:{lb}")
    if a.json:
        report = {
            "window": a.window,
            "exclude": a.exclude,
            "pairs": len(pairs),
            "blocks": [
                {"a": f"{fa}:{la}", "b": f"{fb}:{lb}", "lines": n}
                for (fa, la), (fb, lb), n in pairs
            ],
        }
        Path(a.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
