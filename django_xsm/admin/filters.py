"""A changelist filter on a ``StatechartField``'s state column.

The column holds the projected state (``"cart"``, ``"shipping.packed"``,
``"tracking.road.moving,tracking.customs.pending"``), so the filter offers
what can be matched on it with an index: every atomic state by its exact
path (``<field>__exact=shipping.packed``) and every compound or parallel
state by its prefix (``<field>__startswith=shipping.``, shown as
``shipping.*``). States below a parallel state are covered by the parallel
state's prefix only: the column joins one leaf per region, so a leaf of
one region is neither the whole column nor its start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from django.contrib import admin
from django.contrib.admin.utils import get_last_value_from_parameters
from django.db import models
from django.http import HttpRequest

from django_xsm.engine import Machine
from django_xsm.registry import machines

if TYPE_CHECKING:
    from django.contrib.admin.views.main import ChangeList

__all__ = ["StateChoice", "StatechartStateFilter", "state_choices"]


class StateChoice(NamedTuple):
    """One filter entry: ``lookup`` is ``"exact"`` or ``"startswith"``."""

    lookup: str
    value: str
    label: str


def state_choices(machine: Machine) -> list[StateChoice]:
    """The filter entries of ``machine``'s states, in document order (see
    the module docstring)."""
    found: list[StateChoice] = []
    for node in machine.nodes:
        below_parallel = any(up.type == "parallel" for up in node.ancestors)
        if node.parent is None or node.type == "history" or below_parallel:
            continue
        path = ".".join(n.key for n in [*reversed(node.ancestors[:-1]), node])  # root: no key
        if node.type in ("compound", "parallel"):
            found.append(StateChoice("startswith", f"{path}.", f"{path}.*"))
        else:
            found.append(StateChoice("exact", path, path))
    return found


class StatechartStateFilter(admin.FieldListFilter):
    """``list_filter = [("status", StatechartStateFilter)]``: filter rows by
    their projected state (see the module docstring). Added by
    :class:`~django_xsm.admin.StatechartAdminMixin` for every
    ``StatechartField``; facet counts are supported."""

    def __init__(
        self,
        field: models.Field[Any, Any],
        request: HttpRequest,
        params: dict[str, Any],
        model: type[models.Model],
        model_admin: admin.ModelAdmin[Any],
        field_path: str,
    ) -> None:
        self.lookups = {kind: f"{field_path}__{kind}" for kind in ("exact", "startswith")}
        self.selected = {
            kind: get_last_value_from_parameters(params, name)
            for kind, name in self.lookups.items()
        }
        super().__init__(field, request, params, model, model_admin, field_path)
        entry = machines.get(getattr(field, "machine_name", ""))
        # An unknown machine is a system check error (xsm.E101): no entries.
        self.state_choices = state_choices(entry.machine) if entry is not None else []

    def expected_parameters(self) -> list[str | None]:
        return list(self.lookups.values())

    def get_facet_counts(
        self, pk_attname: str, filtered_qs: models.QuerySet[Any]
    ) -> dict[str, models.Count]:
        return {
            f"{i}__c": models.Count(pk_attname, filter=models.Q((self.lookups[c.lookup], c.value)))
            for i, c in enumerate(self.state_choices)
        }

    def choices(self, changelist: ChangeList) -> Iterator[dict[str, Any]]:  # type: ignore[override]
        counts = self.get_facet_queryset(changelist) if changelist.add_facets else None
        names = list(self.lookups.values())
        yield {
            "selected": not any(self.selected.values()),
            "query_string": changelist.get_query_string(remove=names),
            "display": "All",
        }
        for i, choice in enumerate(self.state_choices):
            name = self.lookups[choice.lookup]
            others = [n for n in names if n != name]
            label = choice.label if counts is None else f"{choice.label} ({counts[f'{i}__c']})"
            yield {
                "selected": self.selected[choice.lookup] == choice.value
                and not any(v for k, v in self.selected.items() if k != choice.lookup),
                "query_string": changelist.get_query_string({name: choice.value}, others),
                "display": label,
            }
