"""No import cycle anywhere in django_xsm, counting every import statement.

The graph is read from the source with :mod:`ast`, so imports inside
functions and under ``if TYPE_CHECKING:`` count as much as module-level
ones: a circle hidden by a deferred import is still a circle to a reader and
to the type checker. ``import_graph`` takes any package directory.
"""

from __future__ import annotations

import ast
from pathlib import Path

import django_xsm

PACKAGE_DIR = Path(django_xsm.__file__).parent


def _package_name(package_dir: Path) -> str:
    """Dotted name of ``package_dir``, found by walking up through ``__init__.py`` files."""
    parts = [package_dir.name]
    parent = package_dir.parent
    while (parent / "__init__.py").exists():
        parts.append(parent.name)
        parent = parent.parent
    return ".".join(reversed(parts))


def _modules(package_dir: Path) -> dict[str, Path]:
    base = _package_name(package_dir)
    found: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).with_suffix("").parts
        if rel[-1] == "__init__":
            rel = rel[:-1]
        found[".".join((base, *rel))] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The most specific module of ``modules`` that ``name`` lies in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that the import statements of ``module`` load."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {_resolve(alias.name, modules) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # ``from pkg import name``: a submodule if there is one, else ``pkg``
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else _resolve(base, modules))
    return {t for t in found if t is not None and t != module}


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports.

    Every ``import`` / ``from ... import`` statement counts, wherever it is
    written; an imported name maps to the most specific module it names;
    imports from outside the package are left out.
    """
    modules = _modules(package_dir)
    return {name: _targets(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_package_has_no_import_cycle() -> None:
    """Every layer and the glue at once: a circle across packages (the glue's
    registry -> managers -> backend -> registry, say) counts too."""
    graph = import_graph(PACKAGE_DIR)
    assert len(graph) > 100  # the walk found every module
    assert {"django_xsm.engine.machine", "django_xsm.backend.build"} <= set(graph)
    assert find_cycles(graph) == []


def test_the_walk_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n"
    )
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from .a import f\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.b"}
    assert graph["pkg.d"] == {"pkg.a"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
