"""Context data: copies (to detect and undo changes: the engine notices that
actions changed the context by comparing it with its copy) and read-only
views (what guards see; nested dicts and lists are wrapped when read, so a
view costs nothing up front). Data nested more than :data:`MAX_DATA_DEPTH`
levels could not be compared, serialised or printed without
``RecursionError``: it is refused (:func:`too_deep`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

from django_xsm.engine.chart.problems import MAX_JSON_DEPTH
from django_xsm.exceptions import DataTooDeepError, InvalidConfigError

__all__ = [
    "MAX_DATA_DEPTH",
    "ListView",
    "MappingView",
    "ReadOnlyError",
    "copy_context",
    "copy_data",
    "read_only",
    "too_deep",
]

MAX_DATA_DEPTH = MAX_JSON_DEPTH  # the same cap as the config's context
_SCALARS = frozenset({str, int, float, bool, type(None)})
_IMMUTABLE = _SCALARS | {bytes, complex, frozenset, range}


def too_deep(what: str = "context") -> DataTooDeepError:
    """The error for ``what`` nested more than :data:`MAX_DATA_DEPTH` levels:
    the one depth rule of every walk over caller data (copies, redaction,
    the stored forms of payloads and results)."""
    return DataTooDeepError(what, limit=MAX_DATA_DEPTH)


def copy_data(value: Any) -> Any:
    """A deep copy of JSON-shaped data (any other object: ``copy.deepcopy``);
    :class:`~django_xsm.exceptions.DataTooDeepError` beyond
    :data:`MAX_DATA_DEPTH` levels."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is dict:
        for v in value.values():
            if type(v) not in _SCALARS:
                break
        else:
            return value.copy()  # the common flat dict: one C-level copy
        out: Any = {}
    elif t is list or t is tuple:
        out = []
    else:
        return _deepcopy(value)
    # iterative: (source container, copy being filled, depth); tuples are
    # filled as lists and frozen when their frame is finished
    stack: list[tuple[Any, Any, int]] = [(value, out, 1)]
    tuples: list[tuple[Any, Any, Any]] = []  # (parent copy, key, list) to freeze
    while stack:
        src, dst, depth = stack.pop()
        items = src.items() if type(src) is dict else enumerate(src)
        is_dict = type(dst) is dict
        for k, v in items:
            vt = type(v)
            if vt in _SCALARS:
                child = v
            elif vt is dict or vt is list or vt is tuple:
                if depth >= MAX_DATA_DEPTH:
                    raise too_deep()
                child = {} if vt is dict else []
                stack.append((v, child, depth + 1))
                if vt is tuple:
                    tuples.append((dst, k if is_dict else len(dst), child))
            else:
                child = _deepcopy(v)
            if is_dict:
                dst[k] = child
            else:
                dst.append(child)
    for parent, key, items_list in reversed(tuples):  # innermost first
        parent[key] = tuple(items_list)
    return tuple(out) if t is tuple else out


def _deepcopy(value: Any) -> Any:
    import copy

    try:
        return copy.deepcopy(value)
    except RecursionError:
        raise too_deep() from None


def copy_context(value: Any, what: str = "context") -> dict[str, Any]:
    """Copy a context dict, with a clear error for non-dicts and for data
    nested too deeply."""
    if not isinstance(value, dict):
        raise InvalidConfigError(
            f"The {what} must be a dict, got {type(value).__name__}",
            path=what,
            hint="pass a dict (or None for the config's context)",
        )
    try:
        copied: dict[str, Any] = copy_data(value)
    except DataTooDeepError:
        raise too_deep(what) from None
    return copied


# -- read-only views -----------------------------------------------------------


class ReadOnlyError(TypeError):
    """A write through a read-only view (a guard changing the context)."""


def read_only(value: Any) -> Any:
    """``value`` as guards see it: scalars as they are, dicts and lists as
    views, tuples with their items wrapped, anything else as a copy."""
    t = type(value)
    if t in _IMMUTABLE:
        return value
    if t is dict or isinstance(value, Mapping):
        return MappingView(value)
    if t is list:
        return ListView(value)
    if t is tuple:
        return tuple(read_only(v) for v in value)
    return _deepcopy(value)


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise ReadOnlyError("the context and the event are read-only here")


class MappingView(Mapping[str, Any]):
    """A read-only, lazily wrapping view of a dict."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return read_only(self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        data = self._data
        return read_only(data[key]) if key in data else default

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return self._data == (other._data if isinstance(other, MappingView) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"read_only({self._data!r})"

    __setitem__ = __delitem__ = _refuse
    pop = popitem = clear = update = setdefault = _refuse


class ListView(Sequence[Any]):
    """A read-only, lazily wrapping view of a list."""

    __slots__ = ("_data",)

    def __init__(self, data: list[Any]) -> None:
        self._data = data

    def __getitem__(self, index: Any) -> Any:
        item = self._data[index]
        if type(index) is slice:
            return tuple(read_only(v) for v in item)
        return read_only(item)

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        return (read_only(v) for v in self._data)

    def __contains__(self, value: object) -> bool:
        return value in self._data

    def __eq__(self, other: object) -> bool:
        return self._data == (other._data if isinstance(other, ListView) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"read_only({self._data!r})"

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
