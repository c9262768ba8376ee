"""Model fields: a Django row bound to its Redis-held statechart.

``StatechartField`` stores the row's projected state (a queryable, indexed
column) and its companion ``<name>_version``; ``order.status`` is a
:class:`BoundStatechart` that reads and sends through ``persisted()`` and
moves the row forward after every commit. See ``docs/models.md``.
"""

from __future__ import annotations

from .bound import BoundStatechart
from .events import AvailableEvent
from .field import StatechartField, StatechartVersionField
from .projection import column_value, project_value

__all__ = [
    "AvailableEvent",
    "BoundStatechart",
    "StatechartField",
    "StatechartVersionField",
    "column_value",
    "project_value",
]
