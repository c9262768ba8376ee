"""The row's projection of a statechart: its state column and its version.

Redis holds the statechart; a model row holds two columns derived from it:
the *state column* (the active atomic states below the root, dotted, with
``","`` between parallel regions in document order) and the *version
column* (the Redis version that column was computed from). The row is
only ever moved forward: every write is one ``UPDATE ... WHERE <lookup>
AND <version> < %s``, so two workers whose updates land in any order can
never move it backwards.

Every commit of a Django-layer block sends ``post_commit`` (inside the
caller's database transaction); :func:`project_commit` moves the row the
commit belongs to: the row a ``BoundStatechart`` block runs for, or, for
commits made elsewhere (the timer scanner, the admin, ``objects.send``),
the row found from the key when the field's key template has a single
placeholder (``"order:{pk}"``: the key names the row).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, TypedDict, Unpack

from django.db import DatabaseError, models, router, transaction

from django_xsm.signals import post_commit

from .keys import FieldSpec, instance_key, row_lookup

logger = logging.getLogger("django_xsm.fields")

__all__ = [
    "RowMove",
    "aadvance_row",
    "advance_row",
    "column_value",
    "field_move",
    "leaf_paths",
    "project_commit",
    "project_value",
    "projecting_row",
    "register_field",
]

#: The (field, row) a ``BoundStatechart`` block runs for: its commit moves
#: that row, in that row's database.
projecting_row: ContextVar[tuple[FieldSpec, models.Model] | None] = ContextVar(
    "xsm_projecting_row", default=None
)

#: machine name -> the StatechartFields of installed models that use it
_FIELDS: dict[str, list[FieldSpec]] = {}


def register_field(field: FieldSpec) -> None:
    """Called by a StatechartField on a concrete, installed model: commits
    of its machine made anywhere then move its rows."""
    _FIELDS.setdefault(field.machine_name, []).append(field)


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


_LEAVES = ("atomic", "final")


def column_value(root: Any, column: str) -> Any:
    """The XState state value a state column stands for, under ``root`` (a
    chart's root node): the inverse of :func:`project_value`, without I/O.
    None when the column names no configuration of this chart (a state
    renamed since, a hand-edited column)."""
    paths = [tuple(leaf.split(".")) for leaf in column.split(",")] if column else []
    try:
        return _value_below(root, paths)
    except LookupError:
        return None


def _value_below(node: Any, paths: list[tuple[str, ...]]) -> Any:
    """The value of ``node`` whose active leaves are ``paths`` (relative to
    it); LookupError when they are not a configuration of it. Recursion is
    bounded by the chart's depth."""
    if node.type in _LEAVES:
        # an atomic root has no leaf path; an atomic region is its own leaf
        if paths != ([] if node.parent is None else [()]):
            raise LookupError(paths)
        return {}
    if any(not path for path in paths):
        raise LookupError(paths)
    if node.type == "parallel":
        value: dict[str, Any] = {}
        for region in node.regions:
            below = [path[1:] for path in paths if path[0] == region.key]
            value[region.key] = _value_below(region, below)
        if any(path[0] not in value for path in paths):
            raise LookupError(paths)  # a leaf under no region
        return value
    keys = {path[0] for path in paths}
    child = next((c for c in node.regions if c.key in keys), None)
    if child is None or len(keys) != 1:
        raise LookupError(paths)  # a compound state has one active child
    below = [path[1:] for path in paths]
    if child.type in _LEAVES:
        if below != [()]:
            raise LookupError(paths)
        return child.key
    return {child.key: _value_below(child, below)}


class RowMove(TypedDict):
    """Where a row's projection moves to: the two columns, the new state and
    version, and the database alias."""

    state_column: str
    version_column: str
    state: str
    version: int
    using: str


def field_move(field: FieldSpec, state: str, version: int, using: str) -> RowMove:
    """The move of a row of ``field``'s model to ``(state, version)``."""
    return RowMove(
        state_column=field.attname,
        version_column=field.version_attname,
        state=state,
        version=version,
        using=using,
    )


def _fenced(
    model: type[models.Model], lookup: Any, move: RowMove
) -> tuple[models.QuerySet[Any], dict[str, Any]]:
    """The rows to update (only those behind ``move``'s version) and the
    values to set."""
    # _base_manager: a custom default manager that filters rows (soft
    # delete, tenancy) must not hide the row being projected.
    where = lookup if isinstance(lookup, dict) else {"pk": lookup}
    version_column, version = move["version_column"], move["version"]
    rows = model._base_manager.using(move["using"]).filter(
        **where, **{f"{version_column}__lt": version}
    )
    return rows, {move["state_column"]: move["state"], version_column: version}


def advance_row(model: type[models.Model], pk: Any, **move: Unpack[RowMove]) -> bool:
    """Move one row's projection forward to ``(state, version)``: one SQL
    ``UPDATE``, in the caller's transaction when one is open. ``pk`` is the
    primary key, or a dict lookup naming the row. True when the row moved
    (False: it was already at or past ``version``, or is gone)."""
    rows, values = _fenced(model, pk, move)
    return bool(rows.update(**values))


async def aadvance_row(model: type[models.Model], pk: Any, **move: Unpack[RowMove]) -> bool:
    """The asyncio twin of :func:`advance_row` (Django's async ORM)."""
    rows, values = _fenced(model, pk, move)
    return bool(await rows.aupdate(**values))


def _move(model: type[models.Model], lookup: Any, move: RowMove) -> None:
    """One row's UPDATE in a savepoint: a failing statement (a deadlock, a
    state longer than the column) is logged and must not leave the
    caller's PostgreSQL transaction aborted after Redis committed. The
    row then lags, and converges like any lagging row."""
    try:
        with transaction.atomic(using=move["using"]):
            advance_row(model, lookup, **move)
    except DatabaseError:
        logger.exception(
            "could not move %s row %r to %r (v%d); it lags until read, sent to or "
            "repaired by xsm_sync_models",
            model._meta.label,
            lookup,
            move["state"],
            move["version"],
        )


def project_commit(
    sender: Any, *, machine: str, key: str, value: Any, version: int, **kwargs: Any
) -> None:
    """``post_commit`` receiver: move the row(s) the commit belongs to."""
    state = project_value(value)
    bound = projecting_row.get()
    if bound is not None:
        field, row = bound
        if field.machine_name == machine and instance_key(row, field) == key:
            using = row._state.db or router.db_for_write(type(row))
            _move(type(row), row.pk, field_move(field, state, version, using))
            return
    for field in _FIELDS.get(machine, ()):
        lookup = row_lookup(field, key)  # None unless the key is exactly a row's
        if lookup is None:
            continue
        model = field.model
        _move(model, lookup, field_move(field, state, version, router.db_for_write(model)))


post_commit.connect(project_commit, dispatch_uid="django_xsm.fields.projection")
