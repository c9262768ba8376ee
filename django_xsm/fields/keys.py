"""A row's instance key: the field's template filled from the row.

``"order:{pk}"`` gives ``"order:42"``; any concrete field name or attname
may stand in braces (``"shop-order:{slug}"``). A row without a primary key
(or with an empty placeholder value) has no key yet: that is refused
before any Redis I/O, with an error that says to save the row first.
"""

from __future__ import annotations

import functools
import re
import string
from typing import Any, Protocol

from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models

from django_xsm.exceptions import InvalidConfigError, UnsavedInstanceError
from django_xsm.persistence.arguments import validate_key

__all__ = ["FieldSpec", "instance_key", "key_pattern", "row_lookup", "usable_key"]


class FieldSpec(Protocol):
    """What the modules below ``field.py`` read of a ``StatechartField``
    (a protocol, so they need not import the field module)."""

    name: str
    attname: str
    machine_name: str
    key_template: str
    model: Any

    @property
    def version_attname(self) -> str: ...


class _RowValues(dict[str, Any]):
    """The row's values by placeholder name, for ``str.format_map``."""

    def __init__(self, row: models.Model, field: FieldSpec) -> None:
        super().__init__()
        self.row = row
        self.field = field

    def __missing__(self, name: str) -> Any:
        value = self.row.pk if name == "pk" else getattr(self.row, name)
        if value is None or value == "":
            raise UnsavedInstanceError(type(self.row).__name__, self.field.name, placeholder=name)
        return value


def instance_key(row: models.Model, field: FieldSpec) -> str:
    """The Redis instance key of ``row``'s statechart in ``field``."""
    return string.Formatter().vformat(field.key_template, (), _RowValues(row, field))


def usable_key(row: models.Model, field: FieldSpec) -> str | None:
    """The row's instance key, or None when it has no usable one (an
    unsaved row, an empty placeholder value, control characters...)."""
    try:
        return validate_key(instance_key(row, field))
    except (UnsavedInstanceError, InvalidConfigError):
        return None


@functools.lru_cache(maxsize=256)
def key_pattern(template: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A regex matching the keys ``template`` produces, and its placeholder
    names in order (one capture group each)."""
    out, names = [], []
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        out.append(re.escape(literal))
        if name is not None:
            out.append("(.+)")
            names.append(name)
    return re.compile("".join(out), re.DOTALL), tuple(names)


def row_lookup(field: FieldSpec, key: str) -> dict[str, Any] | None:
    """The ORM lookup naming the row of ``key``, when the field's template
    has exactly one placeholder (``"order:{pk}"``: ``"order:42"`` ->
    ``{"pk": 42}``); None when the key is not exactly the key of a row.

    The captured text is converted by the model field it names, and the
    key built back from the converted value must equal ``key``: "order:01"
    or "order: 1" are other instances, never row 1's (an int field would
    read them as 1 and let a foreign instance drive that row)."""
    pattern, names = key_pattern(field.key_template)
    if len(names) != 1:
        return None
    found = pattern.fullmatch(key)
    if found is None:
        return None
    name, raw = names[0], found.group(1)
    meta = field.model._meta
    try:
        target = meta.pk if name == "pk" else meta.get_field(name)
        value = target.to_python(raw)
    except (FieldDoesNotExist, ValidationError, ValueError, TypeError):
        return None
    if value is None or field.key_template.format_map({name: value}) != key:
        return None
    return {name: value}
