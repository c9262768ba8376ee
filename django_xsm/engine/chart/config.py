"""Machine config (XState v5 JSON) -> normalised :class:`StateSpec` tree.

Validation is iterative and depth-capped, so no config can raise
``RecursionError``. Every problem is collected with its JSON path
(``states.cart.on.PAY[0].target``) and a hint; :func:`parse_config` raises
one :class:`InvalidConfigError` naming the first and listing all in
``problems``. Targets, ids and logic are checked later by :mod:`.build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError

from .config_transitions import parse_actions, parse_initial, parse_transitions
from .problems import check_json_depth, freeze, raise_problems, suggest
from .problems import path_join as _join
from .specs import ActionSpec, Problems, StateSpec

__all__ = [
    "DEFAULT_MACHINE_ID",
    "MAX_STATE_DEPTH",
    "ParsedConfig",
    "parse_config",
    "suggest",
]

DEFAULT_MACHINE_ID = "(machine)"
MAX_STATE_DEPTH = 64
STATE_TYPES = ("atomic", "compound", "parallel", "final", "history")

# the keys that give a state behaviour: a history state may have none of them
BEHAVIOUR_KEYS = ("initial", "states", "on", "always", "after", "entry", "exit", "onDone")
STATE_KEYS = frozenset(
    {"id", "type", *BEHAVIOUR_KEYS, "history", "target", "description", "meta", "tags"}
)
ROOT_ONLY_KEYS = frozenset({"version", "context"})
HISTORY_ONLY_KEYS = (
    ("target", "put targets inside 'on'/'always'"),
    ("history", 'add "type": "history"'),
)
# XState keys this engine does not implement: say so instead of "unknown".
UNSUPPORTED_KEYS = {
    "invoke": "invoked actors are not supported; model the work as actions",
    "output": "final-state output is not supported",
    "data": "v4 'data' on final states is not supported",
    "activities": "v4 activities are not supported; use entry/exit actions",
    "onEntry": "use 'entry' (XState v5)",
    "onExit": "use 'exit' (XState v5)",
    "parallel": 'use "type": "parallel"',
    "predictableActionArguments": "a v4 option; remove it",
    "preserveActionOrder": "a v4 option; remove it",
    "strict": "a v4 option; strict sends are send(..., strict=True)",
    "schema": "typing-only key; remove it",
    "types": "typing-only key; remove it",
    "tsTypes": "typing-only key; remove it",
    "delimiter": "custom delimiters are not supported",
    "input": "machine input is not supported; pass context to start()",
}


class ParsedConfig(NamedTuple):
    """A validated config: the state tree and the root-level settings."""

    root: StateSpec
    machine_id: str
    version: str
    context: dict[str, Any]
    frozen: Mapping[str, Any]  # the config, read-only, with id and version filled in


def parse_config(config: object) -> ParsedConfig:
    """Validate ``config`` and return the normalised tree (raises on problems)."""
    if not isinstance(config, Mapping):
        raise InvalidConfigError(
            f"A machine config must be a dict, got {type(config).__name__}",
            hint='pass e.g. {"id": "order", "initial": "cart", "states": {...}}',
        )
    problems = Problems()
    machine_id = config.get("id", DEFAULT_MACHINE_ID)
    if not isinstance(machine_id, str) or not machine_id or "#" in machine_id:
        problems.add("The machine id must be a non-empty string without '#'", "id", 'e.g. "order"')
        machine_id = DEFAULT_MACHINE_ID
    version = config.get("version", "")
    if not isinstance(version, str):
        problems.add(
            f"The machine version must be a string, got {type(version).__name__}",
            "version",
            'write it as a string, e.g. "1"',
        )
        version = ""
    context = config.get("context", {})
    if context is None:
        context = {}
    if not isinstance(context, Mapping) or not all(isinstance(k, str) for k in context):
        problems.add("The context must be a dict with string keys", "context")
        context = {}
    elif not check_json_depth(context, "context", problems):
        context = {}
    root = StateSpec(machine_id, "", None, 0)
    _walk(config, root, problems)
    raise_problems(problems)
    frozen = freeze(dict(config, id=machine_id, version=version))
    return ParsedConfig(root, machine_id, version, dict(context), frozen)


def _walk(config: Mapping[str, Any], root: StateSpec, problems: Problems) -> None:
    stack: list[tuple[Mapping[str, Any], StateSpec]] = [(config, root)]
    while stack:
        raw, spec = stack.pop()
        children = _parse_state(raw, spec, problems)
        if children and spec.depth + 1 > MAX_STATE_DEPTH:
            problems.add(
                f"States are nested more than {MAX_STATE_DEPTH} levels deep",
                _join(spec.path, "states"),
                "flatten the chart",
            )
            continue
        for key, child_raw in children:
            child = StateSpec(key, _join(_join(spec.path, "states"), key), spec, spec.depth + 1)
            spec.children.append(child)
            stack.append((child_raw, child))
        # the stack is LIFO; document order is fixed by spec.children


def _parse_state(
    raw: Mapping[str, Any], spec: StateSpec, problems: Problems
) -> list[tuple[str, Mapping[str, Any]]]:
    path = spec.path
    is_root = spec.parent is None
    for key in raw:
        if not isinstance(key, str):
            problems.add(f"Config keys must be strings, got {brief(key)}", path)
            continue
        if key in STATE_KEYS or (is_root and key in ROOT_ONLY_KEYS):
            continue
        where = _join(path, key)
        if key in ROOT_ONLY_KEYS:
            problems.add(
                f"{brief(key)} is only allowed on the root of the config",
                where,
                "move it to the top level",
            )
        elif key in UNSUPPORTED_KEYS:
            problems.add(
                f"{brief(key)} is not supported by django-xsm", where, UNSUPPORTED_KEYS[key]
            )
        else:
            allowed = STATE_KEYS | ROOT_ONLY_KEYS if is_root else STATE_KEYS
            problems.add(
                f"Unknown key {brief(key)}",
                where,
                suggest(key, allowed) or f"allowed keys: {', '.join(sorted(allowed))}",
            )

    if not is_root and "id" in raw:
        sid = raw["id"]
        if not isinstance(sid, str) or not sid or sid.startswith("#"):
            problems.add(
                "A state id must be a non-empty string not starting with '#'", _join(path, "id")
            )
        else:
            spec.explicit_id = sid

    states = raw.get("states")
    children: list[tuple[str, Mapping[str, Any]]] = []
    if states is not None:
        spath = _join(path, "states")
        if not isinstance(states, Mapping):
            problems.add("'states' must be a dict of state key -> state config", spath)
        else:
            for key, child in states.items():
                cpath = _join(spath, key)
                if not isinstance(key, str) or not key or "." in key or key.startswith("#"):
                    problems.add(
                        f"Invalid state key {brief(key)}",
                        cpath,
                        "state keys are non-empty strings without '.' or a leading '#'",
                    )
                elif not isinstance(child, Mapping):
                    problems.add(
                        f"A state config must be a dict, got {type(child).__name__}",
                        cpath,
                        "use {} for a plain atomic state",
                    )
                else:
                    children.append((key, child))

    _parse_type(raw, spec, bool(states), problems)
    _parse_doc_keys(raw, spec, problems)
    if spec.type == "history":
        return _parse_history(raw, spec, problems)

    if "initial" in raw:
        init = raw["initial"]
        ipath = _join(path, "initial")
        if spec.type != "compound":
            problems.add(
                f"'initial' is only allowed on compound states (this one is {spec.type})",
                ipath,
                "remove it",
            )
        else:
            parse_initial(init, ipath, spec, problems)
    elif spec.type == "compound":
        first = next(iter(children), ("<child>", None))[0]
        problems.add(
            "A compound state needs 'initial'",
            _join(path, "initial"),
            f'add "initial": {brief(first)}',
        )

    parse_transitions(raw, spec, problems)
    if "onDone" in raw and spec.type not in ("compound", "parallel"):
        problems.add(
            f"'onDone' only fires for compound or parallel states (this one is {spec.type})",
            _join(path, "onDone"),
            "remove it",
        )
    for key in ("entry", "exit"):
        if key in raw:
            acts: list[ActionSpec] = parse_actions(raw[key], _join(path, key), problems)
            setattr(spec, key, acts)
    return children


def _parse_type(
    raw: Mapping[str, Any], spec: StateSpec, has_states: bool, problems: Problems
) -> None:
    path = spec.path
    stype = raw.get("type")
    if stype is None:
        spec.type = "compound" if has_states else ("history" if "history" in raw else "atomic")
        return
    tpath = _join(path, "type")
    if stype not in STATE_TYPES:
        hint = suggest(stype, STATE_TYPES) if isinstance(stype, str) else ""
        problems.add(
            f"Unknown state type {brief(stype)}", tpath, hint or f"one of {', '.join(STATE_TYPES)}"
        )
        spec.type = "compound" if has_states else "atomic"
        return
    spec.type = stype
    if stype in ("atomic", "final", "history") and has_states:
        problems.add(
            f"A {stype} state cannot have child states",
            _join(path, "states"),
            'remove "states" or the type',
        )
    if stype in ("compound", "parallel") and not has_states:
        problems.add(
            f"A {stype} state needs child states",
            _join(path, "states"),
            "add states or drop the type",
        )
    if spec.parent is None and stype in ("history", "final"):
        problems.add(f"The root cannot be a {stype} state", tpath)


def _parse_history(
    raw: Mapping[str, Any], spec: StateSpec, problems: Problems
) -> list[tuple[str, Mapping[str, Any]]]:
    path = spec.path
    hist = raw.get("history", "shallow")
    if hist not in ("shallow", "deep"):
        problems.add(
            f"Unknown history type {brief(hist)}", _join(path, "history"), 'use "shallow" or "deep"'
        )
        hist = "shallow"
    spec.history = hist
    for key in BEHAVIOUR_KEYS:
        if key in raw:
            problems.add(
                f"A history state cannot have {key!r}",
                _join(path, key),
                "history states only take 'history' and 'target'",
            )
    if "target" in raw:
        target = raw["target"]
        tpath = _join(path, "target")
        if isinstance(target, str) and target:
            spec.history_target = (target,)
        elif isinstance(target, list) and target and all(isinstance(t, str) and t for t in target):
            spec.history_target = tuple(target)
        else:
            problems.add("A history target must be a state key/id or a list of them", tpath)
    return []


def _parse_doc_keys(raw: Mapping[str, Any], spec: StateSpec, problems: Problems) -> None:
    path = spec.path
    for key, hint in HISTORY_ONLY_KEYS:
        if key in raw and spec.type != "history":
            problems.add(f"{key!r} is only allowed on history states", _join(path, key), hint)
    if "description" in raw:
        if isinstance(raw["description"], str):
            spec.description = raw["description"]
        else:
            problems.add("'description' must be a string", _join(path, "description"))
    if "meta" in raw and check_json_depth(raw["meta"], _join(path, "meta"), problems):
        spec.meta = freeze(raw["meta"])
    if "tags" in raw:
        tags = raw["tags"]
        if isinstance(tags, str):
            spec.tags = (tags,)
        elif isinstance(tags, list) and all(isinstance(t, str) for t in tags):
            spec.tags = tuple(tags)
        else:
            problems.add("'tags' must be a string or a list of strings", _join(path, "tags"))
