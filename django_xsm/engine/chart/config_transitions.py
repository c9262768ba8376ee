"""Config parsing for transitions, guards and actions (used by :mod:`.config`).

The accepted shapes are docs/engine.md, "Transitions" and "Actions and
guards"; a built-in action parses its own form (:mod:`django_xsm.engine.actions`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.engine.actions import BUILTIN_ACTIONS, builtin_action
from django_xsm.engine.events import is_valid_descriptor

from .logic import MAX_DELAY_MS
from .problems import check_json_depth, path_join, suggest
from .specs import ActionSpec, GuardSpec, Problems, StateSpec, TransitionSpec

__all__ = ["parse_actions", "parse_initial", "parse_transitions"]

TRANSITION_KEYS = frozenset(
    {"target", "actions", "guard", "cond", "reenter", "description", "meta"}
)
INITIAL_KEYS = ("target", "actions", "description")


def parse_transitions(raw: Mapping[str, Any], spec: StateSpec, problems: Problems) -> None:
    path = spec.path
    out = spec.transitions
    on = raw.get("on")
    if on is not None:
        opath = path_join(path, "on")
        if not isinstance(on, Mapping):
            problems.add("'on' must be a dict of event descriptor -> transition", opath)
        else:
            for desc, value in on.items():
                dpath = path_join(opath, desc)
                if not isinstance(desc, str) or not desc:
                    problems.add(
                        "Event descriptors must be non-empty strings",
                        dpath,
                        "use 'always' for eventless transitions",
                    )
                elif not is_valid_descriptor(desc):
                    problems.add(
                        f"Invalid event descriptor {brief(desc)}",
                        dpath,
                        "a wildcard is only allowed as the last token: '*' or 'prefix.*'",
                    )
                else:
                    out += _transition_list(value, dpath, "on", desc, problems)
    if "always" in raw:
        out += _transition_list(raw["always"], path_join(path, "always"), "always", "", problems)
    if "after" in raw:
        _parse_after(raw["after"], path_join(path, "after"), out, problems)
    if "onDone" in raw:
        out += _transition_list(raw["onDone"], path_join(path, "onDone"), "onDone", "", problems)


def parse_initial(init: Any, path: str, spec: StateSpec, problems: Problems) -> None:
    """``initial``: a child key, or XState's initial transition object
    ``{"target": key, "actions": ..., "description": ...}``."""
    if isinstance(init, str) and init:
        spec.initial, spec.initial_path = init, path
        return
    if not isinstance(init, Mapping):
        problems.add(
            '\'initial\' must be the key of a child state or {"target": key, "actions": ...}', path
        )
        return
    ok = True
    for key in init:
        if not isinstance(key, str):
            problems.add(f"Initial keys must be strings, got {brief(key)}", path_join(path, key))
            ok = False
        elif key not in INITIAL_KEYS:
            hint = (
                suggest(key, INITIAL_KEYS)
                or "an initial transition takes target, actions and description"
            )
            problems.add(f"Unknown initial key {brief(key)}", path_join(path, key), hint)
            ok = False
    target = init.get("target")
    tpath = path_join(path, "target")
    if not isinstance(target, str) or not target:
        problems.add("The initial transition needs a 'target': the key of a child state", tpath)
        ok = False
    if "description" in init and not isinstance(init["description"], str):
        problems.add("'description' must be a string", path_join(path, "description"))
        ok = False
    actions = parse_actions(init.get("actions"), path_join(path, "actions"), problems)
    if ok:
        spec.initial, spec.initial_path, spec.initial_actions = target, tpath, actions


def _parse_after(after: Any, apath: str, out: list[TransitionSpec], problems: Problems) -> None:
    if isinstance(after, Mapping):
        for key, value in after.items():
            delay = _delay(key, path_join(apath, key), problems)
            if delay is not None:
                for t in _transition_list(value, path_join(apath, key), "after", "", problems):
                    t.delay, t.delay_ms = delay
                    out.append(t)
    elif isinstance(after, list):
        for i, item in enumerate(after):
            ipath = path_join(apath, i)
            if not isinstance(item, Mapping) or "delay" not in item:
                problems.add(
                    "Items of the list form of 'after' need a 'delay'",
                    ipath,
                    'e.g. {"delay": 1000, "target": "next"}',
                )
                continue
            delay = _delay(item["delay"], path_join(ipath, "delay"), problems)
            rest = {k: v for k, v in item.items() if k != "delay"}
            spec = _transition(rest, ipath, "after", "", problems)
            if delay is not None and spec is not None:
                spec.delay, spec.delay_ms = delay
                out.append(spec)
    else:
        problems.add(
            "'after' must be a dict of delay -> transition (or a list)",
            apath,
            'e.g. {"1000": "next"}',
        )


def _delay(key: Any, path: str, problems: Problems) -> tuple[str, int | None] | None:
    """(delay as written, ms or None for a named delay). Whole milliseconds
    in ``[0, MAX_DELAY_MS)``; checked before any ``int()``/``str()`` so
    infinities and 5000-digit numbers are problems, not exceptions."""
    ms: int | None = None
    if isinstance(key, bool):
        pass
    elif isinstance(key, int):
        ms = key
    elif isinstance(key, float):
        if math.isfinite(key) and key.is_integer() and abs(key) < MAX_DELAY_MS:
            ms = int(key)
    elif isinstance(key, str) and key.isascii() and key.isdigit():
        if len(key) <= len(str(MAX_DELAY_MS)):
            ms = int(key)
    elif isinstance(key, str) and key.strip() == key and key and not _is_number(key):
        return key, None
    if ms is not None and 0 <= ms < MAX_DELAY_MS:
        return str(ms), ms
    problems.add(
        f"Invalid delay {brief(key)}",
        path,
        'use whole milliseconds in [0, 2**53) ("1000") '
        "or the name of a delay in MachineLogic(delays=...)",
    )
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)  # "1e400", "Infinity", "NaN" and "-5" are numbers: invalid delays
    except ValueError:
        return False
    return True


def _transition_list(
    value: Any, path: str, kind: str, event: str, problems: Problems
) -> list[TransitionSpec]:
    if isinstance(value, list):
        items = [
            _transition(v, path_join(path, i), kind, event, problems) for i, v in enumerate(value)
        ]
        return [t for t in items if t is not None]
    t = _transition(value, path, kind, event, problems)
    return [t] if t is not None else []


def _transition(
    value: Any, path: str, kind: str, event: str, problems: Problems
) -> TransitionSpec | None:
    if value is None:
        return TransitionSpec(kind, event, None, actions=[], guard=None, reenter=False, path=path)
    if isinstance(value, str):
        if not value:
            problems.add(
                "A target must be a non-empty string", path, "use null for a targetless transition"
            )
            return None
        t = TransitionSpec(kind, event, (value,), actions=[], guard=None, reenter=False, path=path)
        t.target_path = path
        return t
    if not isinstance(value, Mapping):
        problems.add(
            f"A transition must be a target string, a dict or a list, got {type(value).__name__}",
            path,
        )
        return None
    ok = True
    for key in value:
        if not isinstance(key, str):
            ok = False
            problems.add(f"Transition keys must be strings, got {brief(key)}", path_join(path, key))
        elif key not in TRANSITION_KEYS:
            ok = False
            hint = (
                "use 'reenter' (XState v5)" if key == "internal" else suggest(key, TRANSITION_KEYS)
            )
            problems.add(f"Unknown transition key {brief(key)}", path_join(path, key), hint)
    seen = len(problems)
    targets = _targets(value.get("target"), path_join(path, "target"), problems)
    ok = ok and len(problems) == seen
    reenter = value.get("reenter", False)
    if not isinstance(reenter, bool):
        problems.add("'reenter' must be true or false", path_join(path, "reenter"))
        ok = False
    guard = None
    if "guard" in value and "cond" in value:
        problems.add(
            "Use either 'guard' or its v4 alias 'cond', not both",
            path_join(path, "cond"),
            "remove 'cond'",
        )
        ok = False
    elif "guard" in value or "cond" in value:
        gkey = "guard" if "guard" in value else "cond"
        guard = _guard(value[gkey], path_join(path, gkey), problems)
        ok = ok and guard is not None
    actions = parse_actions(value.get("actions"), path_join(path, "actions"), problems)
    if "description" in value and not isinstance(value["description"], str):
        problems.add("'description' must be a string", path_join(path, "description"))
        ok = False
    if "meta" in value:
        ok = check_json_depth(value["meta"], path_join(path, "meta"), problems) and ok
    if not ok:
        return None
    t = TransitionSpec(
        kind,
        event,
        targets,
        actions=actions,
        guard=guard,
        reenter=reenter,
        path=path,
    )
    t.target_path = path_join(path, "target")
    return t


def _targets(target: Any, path: str, problems: Problems) -> tuple[str, ...] | None:
    """Target strings; ``None`` when there is no target. Problems are
    appended for bad shapes (the caller checks ``problems`` growth)."""
    if target is None:
        return None
    if isinstance(target, str) and target:
        return (target,)
    if isinstance(target, list) and all(isinstance(t, str) and t for t in target):
        return tuple(target) or None
    problems.add("A target must be a state key, '.child', '#id', or a list of them", path)
    return None


def _reference(value: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None] | None:
    """``(name, params)`` of ``{"type": name, "params": {...}}`` (params
    copied), or ``None`` when the mapping has another shape."""
    name = value.get("type")
    params = value.get("params")
    if (
        not isinstance(name, str)
        or not name
        or any(k not in ("type", "params") for k in value)
        or not (params is None or isinstance(params, Mapping))
    ):
        return None
    return name, dict(params) if params is not None else None


def _deep_params(params: dict[str, Any] | None, path: str, problems: Problems) -> bool:
    """Are ``params`` nested too deeply (the problem is recorded)?"""
    return params is not None and not check_json_depth(params, path_join(path, "params"), problems)


def _guard(value: Any, path: str, problems: Problems) -> GuardSpec | None:
    if isinstance(value, str) and value:
        return GuardSpec(value, None, path)
    ref = _reference(value) if isinstance(value, Mapping) else None
    if ref is not None:
        name, params = ref
        return None if _deep_params(params, path, problems) else GuardSpec(name, params, path)
    problems.add('A guard must be a name or {"type": name, "params": {...}}', path)
    return None


def parse_actions(value: Any, path: str, problems: Problems) -> list[ActionSpec]:
    if value is None:
        return []
    if isinstance(value, list):
        out: list[ActionSpec] = []
        for i, item in enumerate(value):
            if isinstance(item, list):
                problems.add(
                    "Action lists cannot be nested", path_join(path, i), "flatten the list"
                )
                continue
            out += parse_actions(item, path_join(path, i), problems)
        return out
    builtin = builtin_action(value)
    if builtin is not None:
        spec = builtin.parse(value, path, problems)
        return [] if spec is None else [spec]
    if isinstance(value, str) and value:
        return [ActionSpec(value, None, path)]
    if isinstance(value, Mapping):
        ref = _reference(value)
        if ref is not None:
            name, params = ref
            if name.startswith("xstate."):
                problems.add(
                    f"Built-in action {brief(name)} is not supported",
                    path,
                    f"only {_listed([repr(n) for n in BUILTIN_ACTIONS], 'and')} are",
                )
                return []
            if _deep_params(params, path, problems):
                return []
            return [ActionSpec(name, params, path)]
    problems.add(
        'An action must be a name, {"type": name, "params": {...}}, '
        + _listed([f"an {n}" for n in BUILTIN_ACTIONS], "or"),
        path,
    )
    return []


def _listed(words: list[str], conjunction: str) -> str:
    """``"a, b and c"``."""
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} {conjunction} {words[-1]}"
