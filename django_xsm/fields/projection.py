"""The row's projection of a statechart: its state column and its version.

Redis holds the statechart; a model row holds two columns derived from it:
the *state column* (the active atomic states below the root, dotted, with
``","`` between parallel regions in document order) and the *version
column* (the Redis version that column was computed from). The row is
only ever moved forward: every write is one ``UPDATE ... WHERE pk = %s
AND <version> < %s``, so two workers whose updates land in any order can
never move it backwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db import models

__all__ = ["aadvance_row", "advance_row", "leaf_paths", "project_value"]


def leaf_paths(value: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The paths (state keys from below the root) of the active atomic
    states of an XState state value, in the value's (document) order.

    ``"cart"`` -> ``("cart",)``; ``{"shipping": "packed"}`` ->
    ``("shipping", "packed")``; a parallel value yields one path a region;
    an atomic region shown as ``{}`` is its own leaf.
    """
    # Iterative: a state value is as deep as the chart (bounded by the
    # engine's depth cap), but a loop costs nothing and cannot recurse.
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, prefix)]
    out: list[tuple[str, ...]] = []
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            out.append((*path, node))
        elif isinstance(node, dict) and node:
            stack.extend((child, (*path, key)) for key, child in reversed(node.items()))
        elif path:
            out.append(path)
    yield from out


def project_value(value: Any) -> str:
    """The state column for a state value (see the module docstring)."""
    return ",".join(".".join(path) for path in leaf_paths(value))


def _fenced(
    model: type[models.Model], pk: Any, version_column: str, version: int, using: str
) -> models.QuerySet[Any]:
    # _base_manager: a custom default manager that filters rows (soft
    # delete, tenancy) must not hide the row being projected.
    return model._base_manager.using(using).filter(pk=pk, **{f"{version_column}__lt": version})


def advance_row(
    model: type[models.Model],
    pk: Any,
    *,
    state_column: str,
    version_column: str,
    state: str,
    version: int,
    using: str,
) -> bool:
    """Move one row's projection forward to ``(state, version)``: one SQL
    ``UPDATE``, in the caller's transaction when one is open. True when the
    row moved (False: it was already at or past ``version``, or is gone)."""
    rows = _fenced(model, pk, version_column, version, using).update(
        **{state_column: state, version_column: version}
    )
    return bool(rows)


async def aadvance_row(
    model: type[models.Model],
    pk: Any,
    *,
    state_column: str,
    version_column: str,
    state: str,
    version: int,
    using: str,
) -> bool:
    """The asyncio twin of :func:`advance_row` (Django's async ORM)."""
    rows = await _fenced(model, pk, version_column, version, using).aupdate(
        **{state_column: state, version_column: version}
    )
    return bool(rows)
