"""The row's projection of a statechart: its state column and its version
(docs/models.md, "The projection and its guarantee").

The *state column* holds the active atomic states below the root, dotted,
with ``","`` between parallel regions in document order; the *version
column* the Redis version it was computed from. Every write is one
``UPDATE ... WHERE <lookup> AND <version> < %s``, so the row only moves
forward. A committing block is handed its writer as a plugin, which
writes right after the Redis commit in the caller's transaction:
:class:`RowWriter` for the row a ``BoundStatechart`` block runs for,
:class:`KeyedRowWriter` (held by the registry) for blocks that commit
without the row at hand when the key template names one row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, TypedDict, Unpack

from asgiref.sync import sync_to_async
from django.db import DatabaseError, models, router, transaction

from django_xsm.persistence import Plugin
from django_xsm.persistence.block import PersistedInstance
from django_xsm.persistence.records import CommitResult
from django_xsm.registry import machines

from .keys import FieldSpec, key_pattern, row_lookup

logger = logging.getLogger("django_xsm.fields")

__all__ = [
    "KeyedRowWriter",
    "RowMove",
    "RowWriter",
    "aadvance_row",
    "advance_row",
    "column_value",
    "field_move",
    "leaf_paths",
    "project_value",
    "register_field",
]


def register_field(field: FieldSpec) -> None:
    """Called by a StatechartField on a concrete, installed model: when its
    key template names one row, the registry gets a
    :class:`KeyedRowWriter` for it, which it hands to the blocks of the
    field's machine that commit without the row at hand."""
    if len(key_pattern(field.key_template)[1]) == 1:
        machines.add_writer(field.machine_name, KeyedRowWriter(field))


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


class RowWriter(Plugin):
    """The one writer of one row's projection for one block: after the
    block's Redis commit it moves the row (one fenced ``UPDATE`` in a
    savepoint of the caller's transaction, in the row's database) and the
    row object with it. ``moved`` is called with ``(state, version)`` once
    the row object should show them (the bound value keeps its bookkeeping
    there)."""

    __slots__ = ("field", "moved", "row", "using")

    def __init__(
        self,
        field: FieldSpec,
        row: models.Model,
        using: str,
        moved: Callable[[str, int], None],
    ) -> None:
        self.field = field
        self.row = row
        self.using = using
        self.moved = moved

    def after_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        if not block.is_async:  # an async block's write runs off the event loop
            self._write(project_value(block.value), result.version)

    async def aafter_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        await sync_to_async(self._write)(project_value(block.value), result.version)

    def _write(self, state: str, version: int) -> None:
        _move(type(self.row), self.row.pk, field_move(self.field, state, version, self.using))
        self.moved(state, version)


class KeyedRowWriter(Plugin):
    """The writer of the rows of one field whose key template has a single
    placeholder, for blocks that commit without the row at hand: the key
    names the row (:func:`~django_xsm.fields.keys.row_lookup`), moved in
    the database ``router.db_for_write()`` gives. Blocks of another machine
    (the timer scanner runs them all with one set of plugins) are left
    alone."""

    __slots__ = ("field",)

    def __init__(self, field: FieldSpec) -> None:
        self.field = field

    def _lookup(self, block: PersistedInstance) -> dict[str, Any] | None:
        entry = machines.get(self.field.machine_name)
        if entry is None or getattr(block.machine, "id", None) != entry.machine.id:
            return None
        return row_lookup(self.field, block.key)  # None unless the key is exactly a row's

    def after_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        if block.is_async:  # an async block's write runs off the event loop
            return
        lookup = self._lookup(block)
        if lookup is not None:
            self._write(lookup, project_value(block.value), result.version)

    async def aafter_commit(self, block: PersistedInstance, result: CommitResult) -> None:
        lookup = self._lookup(block)  # no I/O: found on the event loop
        if lookup is not None:
            await sync_to_async(self._write)(lookup, project_value(block.value), result.version)

    def _write(self, lookup: dict[str, Any], state: str, version: int) -> None:
        model = self.field.model
        _move(model, lookup, field_move(self.field, state, version, router.db_for_write(model)))

    def __repr__(self) -> str:
        return f"<KeyedRowWriter {self.field.model._meta.label}.{self.field.name}>"
