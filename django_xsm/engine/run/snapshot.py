"""Snapshot dict <-> runtime state (:class:`RunState`), and migrations.

The format (schema 1, :data:`SNAPSHOT_KEYS`) is docs/engine.md, "Snapshots
and migrations". Restoring validates every field against the chart
(``SnapshotCorruptError`` otherwise). A snapshot of another ``machine_version`` goes through the
machine's migrations; one of the same version but another structure hash is
a ``MigrationError`` (the chart changed without a version bump).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.chart.compiled import Chart
from django_xsm.engine.chart.model import ATOMIC, FINAL, HISTORY, StateNode
from django_xsm.exceptions import DataTooDeepError, MigrationError, SnapshotCorruptError

from .configuration import mask_from_value
from .context import copy_data
from .deadlines import Deadline
from .program import Program
from .state import ACTIVE, DONE, STATUSES, RunState

__all__ = ["SCHEMA", "SNAPSHOT_KEYS", "dump_snapshot", "load_snapshot"]

#: entry_seq counts state entries: it stays below 2**53 (a JSON number any
#: reader holds exactly); a larger one is damage.
_MAX_SEQ = 2**53

SCHEMA = 1
SNAPSHOT_KEYS = (
    "schema",
    "machine_id",
    "machine_version",
    "structure",
    "value",
    "context",
    "status",
    "history",
    "deadlines",
    "entry_seq",
)


def dump_snapshot(program: Program, state: RunState) -> dict[str, Any]:
    """The snapshot dict of ``state``; shares nothing mutable with it."""
    chart = program.chart
    return {
        "schema": SCHEMA,
        "machine_id": chart.id,
        "machine_version": program.version,
        "structure": chart.structure_hash,
        "value": state.cfg.value(),
        "context": copy_data(state.context),
        "status": state.status,
        "history": {h: [n.id for n in nodes] for h, nodes in state.history.items()},
        "deadlines": [d.to_dict() for d in state.deadlines],
        "entry_seq": state.seq,
    }


def load_snapshot(program: Program, data: object, *, now: int) -> tuple[RunState, bool]:
    """Validate ``data`` (migrating it if needed) into a new
    :class:`RunState`; also says whether a migration ran."""
    chart = program.chart
    if not isinstance(data, Mapping):
        raise _corrupt(f"expected a dict, got {type(data).__name__}")
    missing = [k for k in SNAPSHOT_KEYS if k not in data]
    if missing:
        raise _corrupt(f"missing key(s) {', '.join(missing)}")
    if data["schema"] != SCHEMA or isinstance(data["schema"], bool):
        raise _corrupt(
            f"unknown schema {brief(data['schema'])} (this engine reads schema {SCHEMA})"
        )
    if data["machine_id"] != chart.id:
        raise _corrupt(f"it belongs to machine {brief(data['machine_id'])}, not {brief(chart.id)}")
    version = data["machine_version"]
    if not isinstance(version, str):
        raise _corrupt(f"machine_version must be a string, got {brief(version)}")
    migrated = version != program.version
    if migrated:
        data = _migrate(program, data, version)
    elif data["structure"] != chart.structure_hash:
        raise _migration_error(
            program,
            f"Snapshot of {brief(chart.id)} version {brief(version)} was written "
            "for another chart structure",
            version,
            "the chart changed without a version bump: bump the machine "
            "version and add a migration from the old version",
        )
    try:
        return _load_fields(program, data, now), migrated
    except SnapshotCorruptError as exc:
        if migrated:
            raise _migration_error(
                program,
                f"Migrating {brief(chart.id)} from version {brief(version)} produced an "
                f"invalid snapshot: {exc.message}",
                version,
                "fix the migration so its result fits the current chart",
            ) from exc
        raise


def _migration_error(program: Program, message: str, found: str, hint: str) -> MigrationError:
    return MigrationError(
        message,
        machine_id=program.chart.id,
        found_version=found,
        expected_version=program.version,
        hint=hint,
    )


def _migrate(program: Program, data: Mapping[str, Any], found: str) -> Mapping[str, Any]:
    migrations = program.migrations
    current: Mapping[str, Any] = copy_data(dict(data))
    for _ in range(len(migrations) + 1):
        ver = current.get("machine_version")
        if ver == program.version:
            return current
        fn = migrations.get(ver) if isinstance(ver, str) else None
        if fn is None:
            break
        result = fn(dict(current))
        if not isinstance(result, Mapping) or result.get("machine_version") == ver:
            raise _migration_error(
                program,
                f"Migration of {brief(program.chart.id)} from version {brief(ver)} "
                "did not return a snapshot with a new machine_version",
                found,
                "a migration returns the snapshot dict with machine_version set "
                "to the version it migrates to",
            )
        current = result
    raise _migration_error(
        program,
        f"No migration turns snapshot version {brief(found)} of {brief(program.chart.id)} into "
        f"version {brief(program.version)}",
        found,
        f"pass migrations={{{brief(found)}: fn}} to create_machine(); each fn takes "
        "and returns a snapshot dict",
    )


def _load_fields(program: Program, data: Mapping[str, Any], now: int) -> RunState:
    for key in SNAPSHOT_KEYS:
        if key not in data:
            raise _corrupt(f"missing key {brief(key)}")
    chart = program.chart
    try:
        mask = mask_from_value(chart.root, data["value"])
    except ValueError as exc:
        raise _corrupt(f"value: {exc}") from None
    ctx = data["context"]
    if not isinstance(ctx, dict) or not all(isinstance(k, str) for k in ctx):
        raise _corrupt("context must be a dict with string keys")
    try:
        context = copy_data(ctx)
    except DataTooDeepError as exc:
        raise _corrupt(f"context: {exc.message}") from None
    status = data["status"]
    if status not in STATUSES:
        raise _corrupt(f"status must be 'active' or 'done', got {brief(status)}")
    seq = data["entry_seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < _MAX_SEQ:
        raise _corrupt(f"entry_seq must be an int from 0 to 2**53 - 1, got {brief(seq)}")
    return RunState(
        program.configurations.get(mask),
        context,
        history=_load_history(chart, data["history"]),
        deadlines=_load_deadlines(chart, data["deadlines"], mask, seq),
        seq=seq,
        status=ACTIVE if status == ACTIVE else DONE,
        now=now,
    )


def _corrupt(message: str) -> SnapshotCorruptError:
    return SnapshotCorruptError(f"Invalid snapshot: {message}")


def _load_history(chart: Chart, raw: Any) -> dict[str, tuple[StateNode, ...]]:
    if not isinstance(raw, Mapping):
        raise _corrupt("history must be a dict")
    by_id = chart.by_id
    history: dict[str, tuple[StateNode, ...]] = {}
    for hid, ids in raw.items():
        hist = by_id.get(hid) if isinstance(hid, str) else None
        if hist is None or hist.type != HISTORY or hist.parent is None:
            raise _corrupt(f"history: {brief(hid)} is not a history state of this chart")
        if not isinstance(ids, list | tuple) or not all(isinstance(i, str) for i in ids):
            raise _corrupt(f"history[{brief(hid)}] must be a list of state ids")
        parent = hist.parent
        nodes = []
        for sid in ids:
            node = by_id.get(sid)
            ok = node is not None and node.type != HISTORY and bool(node.anc_mask & parent.bit)
            if ok and node is not None and hist.history == "shallow":
                ok = node.parent is parent
            elif ok and node is not None:
                ok = node.type in (ATOMIC, FINAL)
            if not ok or node is None:
                raise _corrupt(
                    f"history[{brief(hid)}]: {brief(sid)} cannot be recorded by this history state"
                )
            nodes.append(node)
        history[hid] = tuple(nodes)
    return history


def _load_deadlines(chart: Chart, raw: Any, mask: int, seq: int) -> tuple[Deadline, ...]:
    if not isinstance(raw, list | tuple):
        raise _corrupt("deadlines must be a list")
    out = []
    for i, item in enumerate(raw):
        try:
            d = Deadline.from_dict(item)
        except ValueError as exc:
            raise _corrupt(f"deadlines[{i}]: {exc}") from None
        node = chart.by_id.get(d.state_id)
        if node is None or not mask & node.bit:
            raise _corrupt(f"deadlines[{i}]: state {brief(d.state_id)} is not active")
        if all(e != d.event_type for _, e in node.after):
            raise _corrupt(
                f"deadlines[{i}]: {brief(d.state_id)} has no delayed transition "
                f"{brief(d.event_type)}"
            )
        if d.entry > seq or d.entry < 1:
            raise _corrupt(
                f"deadlines[{i}]: entry {brief(d.entry)} is outside 1..entry_seq ({seq})"
            )
        out.append(d)
    return tuple(out)
