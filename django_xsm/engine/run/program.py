"""What running a chart needs besides the chart: :class:`Program`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django_xsm.engine.chart.compiled import Chart
from django_xsm.engine.chart.model import Frozen

from .configuration import ConfigurationCache

__all__ = ["Migrations", "Program"]

Migrations = Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]]


class Program(Frozen):
    """A compiled chart ready to run (immutable): the ``chart``, the
    ``configurations`` interned for it, ``max_microsteps`` per macrostep,
    and the ``version`` and ``migrations`` its snapshots are written and
    read with. :class:`~django_xsm.engine.Machine` is one."""

    __slots__ = ("chart", "configurations", "max_microsteps", "migrations", "version")

    chart: Chart
    configurations: ConfigurationCache
    max_microsteps: int
    version: str
    migrations: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]

    def __init__(
        self, chart: Chart, *, version: str, migrations: Migrations, max_microsteps: int
    ) -> None:
        self._init_fields(
            chart=chart,
            configurations=ConfigurationCache(chart.nodes),
            max_microsteps=max_microsteps,
            version=version,
            migrations=dict(migrations),
        )
