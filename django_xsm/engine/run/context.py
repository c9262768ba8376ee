"""Copying context data: fast for JSON-shaped data, correct for the rest.

``copy_data`` copies dicts, lists and tuples recursively and returns
scalars as they are; any other object goes through ``copy.deepcopy``
(imported on first use). Equality of the copy with the live context is how
the engine notices that actions changed the context.
"""

from __future__ import annotations

from typing import Any

from django_xsm.exceptions import InvalidConfigError

__all__ = ["copy_context", "copy_data"]

_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_data(value: Any) -> Any:
    t = type(value)
    if t is dict:
        return {k: (v if type(v) in _SCALARS else copy_data(v)) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _SCALARS else copy_data(v) for v in value]
    if t in _SCALARS:
        return value
    if t is tuple:
        return tuple(copy_data(v) for v in value)
    import copy

    return copy.deepcopy(value)


def copy_context(value: Any, what: str = "context") -> dict[str, Any]:
    """Copy a context dict, with a clear error for non-dicts and for data
    nested too deeply to copy (instead of ``RecursionError``)."""
    if not isinstance(value, dict):
        raise InvalidConfigError(
            f"The {what} must be a dict, got {type(value).__name__}",
            path=what,
            hint="pass a dict (or None for the config's context)",
        )
    try:
        copied: dict[str, Any] = copy_data(value)
    except RecursionError:
        raise InvalidConfigError(
            f"The {what} is nested too deeply to copy", path=what, hint="flatten it"
        ) from None
    return copied
