"""A row's instance key: the field's template filled from the row.

``"order:{pk}"`` gives ``"order:42"``; any concrete field name or attname
may stand in braces (``"shop-order:{slug}"``). A row without a primary key
(or with an empty placeholder value) has no key yet: that is refused
before any Redis I/O, with an error that says to save the row first.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import models

from django_xsm.exceptions import UnsavedInstanceError

if TYPE_CHECKING:
    from .field import StatechartField

__all__ = ["instance_key"]


class _RowValues(Mapping[str, Any]):
    """The row's values by placeholder name, for ``str.format_map``."""

    def __init__(self, row: models.Model, field: StatechartField) -> None:
        self.row = row
        self.field = field

    def __getitem__(self, name: str) -> Any:
        value = self.row.pk if name == "pk" else getattr(self.row, name)
        if value is None or value == "":
            raise UnsavedInstanceError(type(self.row).__name__, self.field.name, placeholder=name)
        return value

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


def instance_key(row: models.Model, field: StatechartField) -> str:
    """The Redis instance key of ``row``'s statechart in ``field``."""
    return string.Formatter().vformat(field.key_template, (), _RowValues(row, field))
