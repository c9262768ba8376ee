"""Snapshot dict <-> runtime state, structure hash and migrations.

A snapshot is a JSON-ready dict with these keys (schema 1)::

    {
      "schema": 1,
      "machine_id": "order",
      "machine_version": "1",
      "structure": "3f0c...e1",            # Machine.structure_hash
      "value": "cart",                     # XState state value
      "context": {"items": 0},
      "status": "active",                  # or "done"
      "history": {"order.a.hist": ["order.a.b"]},
      "deadlines": [{"state_id": ..., "entry": 1, "due_ms": ...,
                     "event_type": "xstate.after.1000.order.cart",
                     "delay": "1000"}],
      "entry_seq": 1                       # last entry sequence number used
    }

Restoring validates every field against the chart (``SnapshotCorruptError``
otherwise). A snapshot of another ``machine_version`` goes through the
machine's migrations; one of the same version but another structure hash is
a ``MigrationError`` (the chart changed without a version bump).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django_xsm.engine.chart.model import ATOMIC, FINAL, HISTORY, StateNode
from django_xsm.exceptions import MigrationError, SnapshotCorruptError

from .configuration import mask_from_value
from .context import copy_data
from .deadlines import Deadline

if TYPE_CHECKING:
    from django_xsm.engine.instance import Instance
    from django_xsm.engine.machine import Machine

__all__ = ["SCHEMA", "SNAPSHOT_KEYS", "load_state", "snapshot_of", "structure_hash"]

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


def snapshot_of(inst: Instance) -> dict[str, Any]:
    m = inst._m
    return {
        "schema": SCHEMA,
        "machine_id": m.id,
        "machine_version": m.version,
        "structure": m.structure_hash,
        "value": inst._cfg.value(),
        "context": copy_data(inst._ctx),
        "status": inst._status,
        "history": {h: [n.id for n in nodes] for h, nodes in inst._hist.items()},
        "deadlines": [d.to_dict() for d in inst._deadlines],
        "entry_seq": inst._seq,
    }


def structure_hash(machine: Machine) -> str:
    """Stable hex digest of the chart's structure: states, types, initial
    states, history types and defaults, transitions (kind, event, targets,
    reenter) and delays. Logic (action/guard/delay functions and names) is
    not part of it."""
    import hashlib
    import json

    rows = []
    for n in machine.nodes:
        rows.append(
            [
                n.id,
                n.key,
                n.type,
                n.parent.id if n.parent else None,
                n.initial,
                n.history,
                [t.id for t in n.history_target or ()],
                [[t.kind, t.event, list(t.target_ids), t.reenter] for t in n.transitions],
                [d for d, _ in n.after],
            ]
        )
    text = json.dumps(rows, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]


class LoadedState:
    __slots__ = ("context", "deadlines", "history", "mask", "migrated", "seq", "status")

    def __init__(self) -> None:
        self.mask = 0
        self.context: dict[str, Any] = {}
        self.status = "active"
        self.history: dict[str, tuple[StateNode, ...]] = {}
        self.deadlines: tuple[Deadline, ...] = ()
        self.seq = 0
        self.migrated = False


def _corrupt(message: str) -> SnapshotCorruptError:
    return SnapshotCorruptError(f"Invalid snapshot: {message}")


def load_state(machine: Machine, data: object) -> LoadedState:
    """Validate ``data`` (migrating it if needed) into runtime pieces."""
    if not isinstance(data, Mapping):
        raise _corrupt(f"expected a dict, got {type(data).__name__}")
    missing = [k for k in SNAPSHOT_KEYS if k not in data]
    if missing:
        raise _corrupt(f"missing key(s) {', '.join(missing)}")
    if data["schema"] != SCHEMA or isinstance(data["schema"], bool):
        raise _corrupt(f"unknown schema {data['schema']!r} (this engine reads schema {SCHEMA})")
    if data["machine_id"] != machine.id:
        raise _corrupt(f"it belongs to machine {data['machine_id']!r}, not {machine.id!r}")
    version = data["machine_version"]
    if not isinstance(version, str):
        raise _corrupt(f"machine_version must be a string, got {version!r:.40}")
    out = LoadedState()
    if version != machine.version:
        data = _migrate(machine, data, version)
        out.migrated = True
    elif data["structure"] != machine.structure_hash:
        raise MigrationError(
            f"Snapshot of {machine.id!r} version {version!r} was written for another "
            "chart structure",
            machine_id=machine.id,
            found_version=version,
            expected_version=machine.version,
            hint="the chart changed without a version bump: bump the machine "
            "version and add a migration from the old version",
        )
    try:
        _load_fields(machine, data, out)
    except SnapshotCorruptError as exc:
        if out.migrated:
            raise MigrationError(
                f"Migrating {machine.id!r} from version {version!r} produced an "
                f"invalid snapshot: {exc.message}",
                machine_id=machine.id,
                found_version=version,
                expected_version=machine.version,
                hint="fix the migration so its result fits the current chart",
            ) from exc
        raise
    return out


def _migrate(machine: Machine, data: Mapping[str, Any], version: str) -> Mapping[str, Any]:
    migrations = machine.migrations
    current: Mapping[str, Any] = copy_data(dict(data))
    found = version
    for _ in range(len(migrations) + 1):
        ver = current.get("machine_version")
        if ver == machine.version:
            return current
        fn = migrations.get(ver) if isinstance(ver, str) else None
        if fn is None:
            break
        result = fn(dict(current))
        if not isinstance(result, Mapping) or result.get("machine_version") == ver:
            raise MigrationError(
                f"Migration of {machine.id!r} from version {ver!r} did not return a "
                "snapshot with a new machine_version",
                machine_id=machine.id,
                found_version=found,
                expected_version=machine.version,
                hint="a migration returns the snapshot dict with machine_version set "
                "to the version it migrates to",
            )
        current = result
    raise MigrationError(
        f"No migration turns snapshot version {found!r} of {machine.id!r} into "
        f"version {machine.version!r}",
        machine_id=machine.id,
        found_version=found,
        expected_version=machine.version,
        hint=f"pass migrations={{{found!r}: fn}} to create_machine(); each fn takes "
        "and returns a snapshot dict",
    )


def _load_fields(machine: Machine, data: Mapping[str, Any], out: LoadedState) -> None:
    for key in SNAPSHOT_KEYS:
        if key not in data:
            raise _corrupt(f"missing key {key!r}")
    try:
        out.mask = mask_from_value(machine.root, data["value"])
    except ValueError as exc:
        raise _corrupt(f"value: {exc}") from None
    ctx = data["context"]
    if not isinstance(ctx, dict) or not all(isinstance(k, str) for k in ctx):
        raise _corrupt("context must be a dict with string keys")
    try:
        out.context = copy_data(ctx)
    except RecursionError:
        raise _corrupt("context is nested too deeply") from None
    status = data["status"]
    if status not in ("active", "done"):
        raise _corrupt(f"status must be 'active' or 'done', got {status!r:.40}")
    out.status = "active" if status == "active" else "done"
    seq = data["entry_seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise _corrupt(f"entry_seq must be an int >= 0, got {seq!r:.40}")
    out.seq = seq
    out.history = _load_history(machine, data["history"])
    out.deadlines = _load_deadlines(machine, data["deadlines"], out.mask, seq)


def _load_history(machine: Machine, raw: Any) -> dict[str, tuple[StateNode, ...]]:
    if not isinstance(raw, Mapping):
        raise _corrupt("history must be a dict")
    by_id = machine._by_id
    history: dict[str, tuple[StateNode, ...]] = {}
    for hid, ids in raw.items():
        hist = by_id.get(hid) if isinstance(hid, str) else None
        if hist is None or hist.type != HISTORY or hist.parent is None:
            raise _corrupt(f"history: {hid!r} is not a history state of this chart")
        if not isinstance(ids, list | tuple) or not all(isinstance(i, str) for i in ids):
            raise _corrupt(f"history[{hid!r}] must be a list of state ids")
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
                    f"history[{hid!r}]: {sid!r} cannot be recorded by this history state"
                )
            nodes.append(node)
        history[hid] = tuple(nodes)
    return history


def _load_deadlines(machine: Machine, raw: Any, mask: int, seq: int) -> tuple[Deadline, ...]:
    if not isinstance(raw, list | tuple):
        raise _corrupt("deadlines must be a list")
    out = []
    for i, item in enumerate(raw):
        try:
            d = Deadline.from_dict(item)
        except ValueError as exc:
            raise _corrupt(f"deadlines[{i}]: {exc}") from None
        node = machine._by_id.get(d.state_id)
        if node is None or not mask & node.bit:
            raise _corrupt(f"deadlines[{i}]: state {d.state_id!r} is not active")
        if all(e != d.event_type for _, e in node.after):
            raise _corrupt(
                f"deadlines[{i}]: {d.state_id!r} has no delayed transition {d.event_type!r}"
            )
        if d.entry > seq or d.entry < 1:
            raise _corrupt(f"deadlines[{i}]: entry {d.entry} is outside 1..entry_seq ({seq})")
        out.append(d)
    return tuple(out)
