"""``@stateful_view(model=Order)``: a view bound to a model row and its statechart.

:class:`RowBinding` names the model, the lookup and the StatechartField;
for a request it fetches the row from the URL kwargs (a missing row, or a
lookup value the field cannot take, is :class:`RowNotFoundError`: a 404)
and hands back the row's bound statechart, whose ``open()`` block the view
runs in and whose projection moves after the commit.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured, ObjectDoesNotExist, ValidationError
from django.db import models

from django_xsm.brief import brief
from django_xsm.exceptions import InstanceNotFoundError, StoreError

from .bound import BoundStatechart
from .field import StatechartField

__all__ = ["RowBinding", "RowNotFoundError"]


class RowNotFoundError(InstanceNotFoundError):
    """The row a model-bound view looks up does not exist (a 404)."""

    def __init__(self, model: type[models.Model], lookup: str, value: object) -> None:
        # StoreError's constructor: the message names the row, not a key.
        StoreError.__init__(
            self,
            f"No {model._meta.label} with {lookup}={_shown(value)}",
            hint="check the URL",
        )
        self.machine = ""
        self.model = model


def _shown(value: object) -> str:
    # The URL's text, quoted; but a converter may hand over anything: an
    # int of 5000 digits, a tuple nested 3000 deep (str() of those raises).
    if type(value) is str or (type(value) is int and value.bit_length() <= 128):
        return repr(str(value)[:100])
    return brief(value)


#: What a lookup value no row can have raises in the ORM: the wrong type,
#: out of the column's range (OverflowError), nested past Django's
#: recursion while it resolves expressions (RecursionError).
_NO_SUCH_ROW = (
    ObjectDoesNotExist,
    ValueError,
    TypeError,
    ValidationError,
    OverflowError,
    RecursionError,
)


class RowBinding:
    """How a model-bound view finds its row (see the module docstring)."""

    def __init__(
        self,
        model: type[models.Model],
        *,
        lookup: str = "pk",
        url_kwarg: str | None = None,
        field: str | None = None,
    ) -> None:
        if not (isinstance(model, type) and issubclass(model, models.Model)):
            raise ImproperlyConfigured(
                f"stateful_view(model=...) needs a model class, got {brief(model)}"
            )
        self.model = model
        self.lookup = lookup
        self.url_kwarg = url_kwarg or lookup
        self.field = self._statechart_field(model, field)

    @staticmethod
    def _statechart_field(model: type[models.Model], name: str | None) -> StatechartField:
        found = [f for f in model._meta.get_fields() if isinstance(f, StatechartField)]
        if name is not None:
            for f in found:
                if f.name == name:
                    return f
            raise ImproperlyConfigured(
                f"stateful_view(field={name!r}): {model._meta.label} has no StatechartField "
                f"{name!r} (it has: {', '.join(f.name for f in found) or 'none'})"
            )
        if len(found) != 1:
            raise ImproperlyConfigured(
                f"stateful_view(model={model._meta.label}) needs field=... naming one of its "
                f"StatechartFields ({', '.join(f.name for f in found) or 'it has none'})"
            )
        return found[0]

    def _value(self, kwargs: dict[str, Any]) -> Any:
        if self.url_kwarg not in kwargs:
            raise ImproperlyConfigured(
                f"stateful_view(model={self.model._meta.label}) reads the URL keyword "
                f"argument {self.url_kwarg!r}; this URL pattern passes {sorted(kwargs) or 'none'} "
                "(set url_kwarg=...)"
            )
        return kwargs[self.url_kwarg]

    def row(self, kwargs: dict[str, Any]) -> models.Model:
        value = self._value(kwargs)
        try:
            return self.model._default_manager.get(**{self.lookup: value})
        except _NO_SUCH_ROW:
            raise RowNotFoundError(self.model, self.lookup, value) from None

    async def arow(self, kwargs: dict[str, Any]) -> models.Model:
        value = self._value(kwargs)
        try:
            return await self.model._default_manager.aget(**{self.lookup: value})
        except _NO_SUCH_ROW:
            raise RowNotFoundError(self.model, self.lookup, value) from None

    def statechart(self, row: models.Model) -> BoundStatechart:
        bound = getattr(row, self.field.name)
        assert isinstance(bound, BoundStatechart)
        return bound
