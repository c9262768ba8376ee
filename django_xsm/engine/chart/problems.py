"""Config problems: JSON paths, collected problems, depth checks, hints.

Shared by :mod:`.config`, :mod:`.config_transitions` and :mod:`.build`. ``difflib``
is imported only when a hint is needed (it is slow to import).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_xsm.brief import brief
from django_xsm.exceptions import InvalidConfigError

from .specs import Problems

__all__ = [
    "MAX_JSON_DEPTH",
    "check_json_depth",
    "freeze",
    "path_join",
    "raise_problems",
    "suggest",
]

MAX_JSON_DEPTH = 100
_SIMPLE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-$")


def path_join(base: str, key: object) -> str:
    """JSON path: ``a.b`` for plain keys, ``a["x.*"]`` otherwise, ``a[0]`` for ints."""
    if type(key) is int and key.bit_length() <= 64:
        return f"{base}[{key}]"
    text = key if isinstance(key, str) else brief(key)
    if text and all(c in _SIMPLE for c in text):
        return f"{base}.{text}" if base else text
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'{base}["{quoted}"]'


def raise_problems(problems: Problems) -> None:
    """Raise one InvalidConfigError for the first problem, listing all."""
    if not problems:
        return
    message, path, hint = problems[0]
    if len(problems) > 1:
        message = f"{message} [and {len(problems) - 1} more problem(s), see .problems]"
    raise InvalidConfigError(message, path=path, hint=hint, problems=problems.listing())


def check_json_depth(
    value: Any, path: str, problems: Problems, limit: int = MAX_JSON_DEPTH
) -> bool:
    """Iteratively check that dicts/lists nest at most ``limit`` levels."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= limit:
            problems.add(f"Data is nested more than {limit} levels deep", path, "flatten it")
            return False
        stack.extend((c, depth + 1) for c in children)
    return True


def suggest(word: str, choices: Any) -> str:
    """``"did you mean 'x'?"`` or ``""`` (difflib is imported only on error)."""
    if not isinstance(word, str):
        return ""
    import difflib

    names = [c for c in choices if isinstance(c, str)]
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def freeze(value: Any) -> Any:
    """Read-only deep copy: dicts become mapping proxies, lists tuples.

    Depth was checked by the caller for the user data parts; the state tree
    itself is capped by MAX_STATE_DEPTH, so recursion stays shallow.
    """
    from types import MappingProxyType

    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value
