"""``StatechartField``: a model column that projects a Redis-held statechart.

::

    class Order(models.Model):
        status = StatechartField(machine="order")     # key "order:<pk>"

A ``CharField`` holding the projected state (:mod:`.projection`) that adds
its companion ``<name>_version`` column itself. Reading ``order.status``
gives a :class:`~django_xsm.fields.bound.BoundStatechart`; assigning a
state raises: state changes only through events.
"""

from __future__ import annotations

import string
import sys
from collections.abc import Sequence
from typing import Any

from django.apps import apps as global_apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_delete
from django.utils.functional import Promise

from django_xsm import conf
from django_xsm.exceptions import ArgumentTypeError, StateAssignmentError
from django_xsm.registry import machines

from .bound import BoundStatechart, initial_column
from .lifecycle import created_on_insert, forget_on_delete
from .projection import register_field

__all__ = ["ON_DELETE_CHOICES", "StatechartField", "StatechartVersionField", "longest_projection"]

#: What deleting a row does to its statechart: ``"forget"`` erases the Redis
#: instance and its transition log once the deletion commits; ``"keep"``
#: leaves both (an orphan ``xsm_sync_models`` reports).
ON_DELETE_CHOICES = ("forget", "keep")


def longest_projection(root: Any) -> int:
    """An upper bound of the state column a machine can produce (exact for
    usual charts): a leaf path repeats every ancestor's key, a parallel
    state's regions are joined with commas. Iterative: charts nest up to
    the engine's depth cap."""
    # per node: (characters of its leaf paths, number of leaf paths)
    sizes: dict[int, tuple[int, int]] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        children = [c for c in node.children if c.type != "history"]
        if children and not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in children)
            continue
        prefix = 0 if node is root else len(node.key) + 1  # "key."
        if not children:
            sizes[id(node)] = (len(node.key), 1)
            continue
        inner = [sizes[id(c)] for c in children]
        if node.type == "parallel":
            paths = sum(n for _, n in inner)
            chars = sum(c for c, _ in inner)
        else:
            paths = max(n for _, n in inner)
            chars = max(c for c, _ in inner)
        sizes[id(node)] = (chars + paths * prefix, paths)
    chars, paths = sizes[id(root)]
    return chars + paths - 1  # the commas between leaf paths


class StatechartVersionField(models.PositiveBigIntegerField):  # type: ignore[type-arg]
    """The companion ``<name>_version`` column: the Redis version the state
    column was projected from (0: nothing committed yet).

    Added by :class:`StatechartField`; a migration names it explicitly, so
    when the model is rebuilt from migrations the field that is already
    there is kept and this one steps aside.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("default", 0)
        kwargs["editable"] = False
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        kwargs.pop("editable", None)
        if kwargs.get("default") == 0:
            kwargs.pop("default")
        return name, "django_xsm.fields.StatechartVersionField", args, kwargs

    def contribute_to_class(
        self, cls: type[models.Model], name: str, private_only: bool = False
    ) -> None:
        if any(f.name == name for f in cls._meta.local_fields):
            return
        super().contribute_to_class(cls, name, private_only)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        # An ordinary save() must not write a stale projection over a newer
        # one another worker wrote: on UPDATE the column keeps its value.
        # A new row starts at version 0 whatever the object holds (a clone
        # of a saved row, create(..._version=...)); only commits move it.
        if add:
            model_instance.__dict__[self.attname] = 0
            return 0
        return models.F(self.attname)


class _StatechartAttribute(DeferredAttribute):
    """``order.status``: the bound statechart; loading and refreshing rows
    may set the column, code may not."""

    field: StatechartField

    def __get__(self, instance: models.Model | None, cls: Any = None) -> Any:
        if instance is None:
            return self
        super().__get__(instance, cls)  # loads a deferred column
        return BoundStatechart(instance, self.field)

    def __set__(self, instance: models.Model, value: Any) -> None:
        attname = self.field.attname
        # The caller's frame is looked at only when the assignment would be
        # refused: loading rows (a first assignment each) stays cheap.
        if isinstance(value, BoundStatechart):
            # refresh_from_db() passes the bound value of the row it read;
            # another row's state (new.status = old.status) is refused.
            if value.row is not instance and not _set_by_django_model(sys._getframe(1)):
                raise StateAssignmentError(type(instance).__name__, self.field.name, value.column)
            value = value.column
        elif (
            attname in instance.__dict__
            and value != instance.__dict__[attname]
            and not _set_by_django_model(sys._getframe(1))
        ):
            raise StateAssignmentError(type(instance).__name__, self.field.name, value)
        instance.__dict__[attname] = "" if value is None else str(value)


def _set_by_django_model(frame: Any) -> bool:
    """True when Django's model machinery sets the column: ``Model.__init__``
    (rows loaded, fixtures), ``refresh_from_db()`` and the values a save
    reads back (Django 6 refreshes columns saved as expressions). Those
    copy what the database holds; only code outside them is refused (the
    first assignment of a new instance is always allowed)."""
    return bool(frame is not None and frame.f_globals.get("__name__") == "django.db.models.base")


class StatechartField(models.CharField):  # type: ignore[type-arg]
    """A row's state, projected from its statechart in Redis.

    ``machine``: the registered machine name (``XSM["MACHINES"]``).
    ``key``: the instance key template; ``{pk}`` and the model's field
    names are replaced (default ``"<machine>:{pk}"``). ``on_delete``:
    ``"forget"`` (default) erases the Redis instance and its log when the
    row's deletion commits, ``"keep"`` leaves them. The column is indexed,
    not editable in forms, and at most ``max_length`` (255) characters.
    """

    descriptor_class = _StatechartAttribute
    description = "State of a statechart held in Redis (a projection)"

    def __init__(
        self,
        *args: Any,
        machine: str = "",
        key: str | None = None,
        on_delete: str = "forget",
        **kwargs: Any,
    ) -> None:
        if not isinstance(machine, str) or not machine:
            raise TypeError(
                "StatechartField needs machine='<name registered in XSM[\"MACHINES\"]>'"
            )
        if key is not None and (not isinstance(key, str) or not key):
            raise TypeError(
                "StatechartField(key=...) must be a non-empty template such as 'order:{pk}'"
            )
        if on_delete not in ON_DELETE_CHOICES:
            raise ValueError(
                f"StatechartField(on_delete={on_delete!r}) must be one of {ON_DELETE_CHOICES}"
            )
        self.machine_name = machine
        self.key_template = key if key is not None else f"{machine}:{{pk}}"
        self.on_delete = on_delete
        kwargs.setdefault("max_length", 255)
        kwargs.setdefault("db_index", True)
        kwargs["editable"] = False
        kwargs.setdefault("default", "")
        super().__init__(*args, **kwargs)

    @property
    def version_attname(self) -> str:
        return f"{self.name}_version"

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        kwargs.pop("editable", None)
        if kwargs.get("max_length") == 255:
            kwargs.pop("max_length")
        if kwargs.get("db_index") is True:
            kwargs.pop("db_index")
        if kwargs.get("default") == "":
            kwargs.pop("default")
        kwargs["machine"] = self.machine_name
        if self.key_template != f"{self.machine_name}:{{pk}}":
            kwargs["key"] = self.key_template
        if self.on_delete != "forget":
            kwargs["on_delete"] = self.on_delete
        return name, "django_xsm.fields.StatechartField", args, kwargs

    def contribute_to_class(
        self, cls: type[models.Model], name: str, private_only: bool = False
    ) -> None:
        super().contribute_to_class(cls, name, private_only)
        if cls._meta.abstract:
            return
        if not any(f.name == self.version_attname for f in cls._meta.local_fields):
            companion = StatechartVersionField()
            # Right after this field in field order (forms, admin, dumpdata).
            companion.creation_counter = self.creation_counter + 0.5  # type: ignore[assignment]
            cls.add_to_class(self.version_attname, companion)
        if cls._meta.apps is not global_apps:
            return  # a model rebuilt from migrations: no receivers of its own
        register_field(self)
        if self.on_delete == "forget":
            post_delete.connect(forget_on_delete(self), sender=cls, weak=False)

    def get_default(self) -> Any:
        # A new row shows the machine's initial state until its first event.
        return initial_column(self.machine_name)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        # See StatechartVersionField.pre_save: save() never moves the
        # projection (neither back nor forward); only events do. A new row
        # starts at the machine's initial state, whatever the object holds
        # (fixtures are raw saves: they keep theirs). Its instance is
        # created once the INSERT commits (see lifecycle.py).
        if add:
            initial = initial_column(self.machine_name)
            model_instance.__dict__[self.attname] = initial
            if self.model._meta.apps is global_apps:  # not in a migration
                created_on_insert(self, model_instance)
            return initial
        return models.F(self.attname)

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, BoundStatechart):
            value = value.column  # lookups: filter(status=order.status)
        elif value is not None and not isinstance(value, str | Promise):
            # A state is a name: str() of anything else would be no state,
            # and of a tuple 3000 levels deep or an int of 5000 digits it
            # raises RecursionError / ValueError inside the ORM.
            raise ArgumentTypeError(
                f"{self.model.__name__}.{self.name}", value, expected="a state name (str)"
            )
        return super().get_prep_value(value)

    def value_from_object(self, obj: models.Model) -> Any:
        # Forms, model_to_dict() and serializers (dumpdata) see the string.
        return obj.__dict__.get(self.attname, "")

    def formfield(
        self, form_class: Any = None, choices_form_class: Any = None, **kwargs: Any
    ) -> None:
        return None  # never editable in a form: state changes through events

    # --- system checks -----------------------------------------------------------

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        found = [*super().check(**kwargs), *self._check_key_template()]
        try:
            conf.get_settings()
        except ImproperlyConfigured:
            # The machines cannot be loaded from invalid settings; check
            # (xsm.E001) lists every settings problem, once, not per field.
            return found
        return [*found, *self._check_machine(), *self._check_length()]

    def _check_length(self) -> list[checks.CheckMessage]:
        entry = machines.get(self.machine_name)
        if entry is None or self.max_length is None:
            return []
        longest = longest_projection(entry.machine.root)
        if longest <= self.max_length:
            return []
        return [
            checks.Warning(
                f"{self._where()} can hold states of up to {longest} characters, over its "
                f"max_length of {self.max_length}",
                hint=f"set StatechartField(max_length={longest}) or more; a longer state "
                "cannot be written to the row, which then lags Redis",
                obj=self,
                id="xsm.W101",
            )
        ]

    def _where(self) -> str:
        return f"{self.model._meta.label}.{self.name}"

    def _check_machine(self) -> list[checks.CheckMessage]:
        if self.machine_name in machines:
            return []
        failed = next((p for p in machines.problems if p.name == self.machine_name), None)
        if failed is not None:
            # Registered, but it did not load: say why (xsm.E007 says it too,
            # without naming the fields that need it).
            problem = f"failed to load: {failed.message}"
            hint = failed.hint or f"see xsm.E007 for XSM['MACHINES'][{self.machine_name!r}]"
        else:
            problem = "is not registered"
            known = ", ".join(sorted(machines.names())) or "none"
            hint = f"add it to XSM['MACHINES'] (registered: {known})"
        return [
            checks.Error(
                f"{self._where()} names machine {self.machine_name!r}, which {problem}",
                hint=hint,
                obj=self,
                id="xsm.E101",
            )
        ]

    def _check_key_template(self) -> list[checks.CheckMessage]:
        names = {"pk"} | {f.name for f in self.model._meta.concrete_fields}
        names |= {f.attname for f in self.model._meta.concrete_fields}
        try:
            parts = [field for _, field, spec, conv in string.Formatter().parse(self.key_template)]
        except ValueError as exc:
            return [self._key_error(f"is not a valid template ({exc})")]
        used = [p for p in parts if p is not None]
        if "" in used or any(not p.isidentifier() for p in used):
            return [self._key_error("may use only {pk} and {field_name} placeholders")]
        unknown = sorted(set(used) - names)
        if unknown:
            return [self._key_error(f"names {unknown} which the model does not have")]
        if not used:
            return [self._key_error("has no placeholder: every row would share one statechart")]
        return []

    def _key_error(self, problem: str) -> checks.CheckMessage:
        return checks.Error(
            f"{self._where()} key template {self.key_template!r} {problem}",
            hint="use e.g. key='order:{pk}' (placeholders: pk and the model's field names)",
            obj=self,
            id="xsm.E102",
        )
