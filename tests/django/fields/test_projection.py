"""``column_value``: the XState value a state column stands for (what a
DRF ``full_value`` field answers from the row when Redis is unreachable),
the exact inverse of the projection for every configuration of a chart
with compound and parallel states; None for a column the chart cannot hold."""

from __future__ import annotations

from typing import Any

import pytest

from django_xsm.fields import column_value, project_value
from tests.fieldapp.machines import PARCEL, parcel


def _configurations() -> list[Any]:
    values: list[Any] = ["packing", {"shipping": "picked"}, {"shipping": "loaded"}]
    for road in PARCEL["states"]["tracking"]["states"]["road"]["states"]:
        for customs in PARCEL["states"]["tracking"]["states"]["customs"]["states"]:
            values.append({"tracking": {"road": road, "customs": customs}})
    return values


@pytest.mark.parametrize("value", _configurations())
def test_column_value_inverts_the_projection(value: Any) -> None:
    assert column_value(parcel.root, project_value(value)) == value


@pytest.mark.parametrize(
    "column",
    ["", "nowhere", "shipping", "packing,packing", "tracking.road.moving",
     "shipping.picked,shipping.loaded", "packing.inner", "tracking.road.moving,elsewhere.x"],
)  # fmt: skip
def test_column_value_is_none_for_a_column_the_chart_cannot_hold(column: str) -> None:
    assert column_value(parcel.root, column) is None
