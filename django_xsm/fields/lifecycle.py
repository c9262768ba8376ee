"""What a row's lifecycle does to its statechart: creation and deletion
(user-facing rules: docs/models.md, "When the instance is created" and
"Deleting rows").

**Creation.** Every non-raw INSERT (``save()``, ``create()``,
``bulk_create()``) calls the field's ``pre_save(add=True)`` just before it
runs, but Django hands no field hook the INSERT's database nor calls one
after it. Both ``save()`` and ``bulk_create()`` end every written row by
setting ``_state.adding = False`` and ``_state.db`` (in either order), so
``pre_save`` marks the row's ``_state`` (:class:`_Inserting`) and the
creation is scheduled once both are set: on the transaction's commit, at
once in autocommit. A failure is logged (one WARNING naming the row),
never raised: ``xsm_sync_models`` creates the instance later.

**Deletion.** ``on_delete="forget"`` erases the instance on the deletion's
commit, fenced by the version read at delete time; a proxy model's
deletions forget too (:func:`_connect_proxy`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.db import models, router, transaction
from django.db.models.base import ModelState
from django.db.models.signals import class_prepared, post_delete

from django_xsm import backend
from django_xsm.exceptions import XsmError
from django_xsm.registry import machines

from .bound import BoundStatechart
from .keys import FieldSpec, usable_key

__all__ = ["created_on_insert", "forget_on_delete"]

logger = logging.getLogger("django_xsm.fields")

#: (signal, field, receiver) of every field: a proxy of the field's
#: (concrete) model defined later gets the same receivers.
_RECEIVERS: list[tuple[Any, FieldSpec, Callable[..., None]]] = []

_NOT_FORGOTTEN = (
    "could not forget %r after its row was deleted (%s); "
    "'manage.py xsm_sync_models --forget-orphans' erases it later"
)


# --- creation ------------------------------------------------------------------------


class _Inserting(ModelState):
    """A row's ``_state`` between its fields' ``pre_save(add=True)`` and the
    end of its INSERT: once Django has set both ``adding = False`` and
    ``db`` (the row is written, its primary key known), each field's
    creation is scheduled and the state is a plain ``ModelState`` again.
    An INSERT that fails sets neither; the next ``save()`` marks it anew."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name not in ("adding", "db"):
            return
        seen = self.__dict__.setdefault(_SEEN, set())
        seen.add(name)
        if "db" in seen and self.__dict__.get("adding") is False:
            pending: dict[str, tuple[FieldSpec, models.Model]] = self.__dict__.pop(_PENDING, {})
            del self.__dict__[_SEEN]
            self.__class__ = ModelState  # type: ignore[assignment]
            for field, row in pending.values():
                _schedule(field, row)


_PENDING = "_xsm_creations"
_SEEN = "_xsm_written"


def created_on_insert(field: FieldSpec, row: models.Model) -> None:
    """Called by the field's ``pre_save(add=True)``, just before the row's
    INSERT: the row's instance is created once the INSERT is written (see
    :class:`_Inserting`), on its commit."""
    state = row._state
    if type(state) is ModelState:
        state.__class__ = _Inserting
    elif not isinstance(state, _Inserting):  # a ModelState subclass of the project's
        logger.warning(
            "%s: its _state is a %s, not Django's ModelState; its statechart is created by "
            "'manage.py xsm_sync_models'",
            row._meta.label,
            type(state).__name__,
        )
        return
    state.__dict__.pop(_SEEN, None)  # a retried save() after a failed INSERT
    state.__dict__.setdefault(_PENDING, {})[field.attname] = (field, row)


def _schedule(field: FieldSpec, row: models.Model) -> None:
    """The row is written on ``row._state.db``: create its instance once
    that database commits (at once in autocommit)."""
    using = row._state.db or router.db_for_write(type(row), instance=row)
    if transaction.get_connection(using).in_atomic_block:
        transaction.on_commit(functools.partial(_create, field, row), using=using)
    else:
        _create(field, row)


def _create(field: FieldSpec, row: models.Model) -> None:
    """Store ``row``'s instance; log instead of raising (the row is committed)."""
    if row.pk is None:
        # deleted since (delete() clears the primary key), or a key the
        # database did not return (bulk_create(ignore_conflicts=True))
        return
    if usable_key(row, field) is None:
        return  # the reconciler reports the row as unkeyed
    try:
        BoundStatechart(row, field).create()
    except XsmError as exc:
        # The class only: a message may name the server (never logged).
        logger.warning(
            "%s pk=%r: its statechart was not created when the row was saved (%s); "
            "'manage.py xsm_sync_models' creates it",
            row._meta.label,
            row.pk,
            type(exc).__name__,
        )
    except Exception:
        # An entry action raised (a bug in the chart's code), or worse: the
        # traceback says which.
        logger.exception(
            "%s pk=%r: its statechart was not created when the row was saved; "
            "'manage.py xsm_sync_models' creates it once the error below is fixed",
            row._meta.label,
            row.pk,
        )


# --- deletion ------------------------------------------------------------------------


def forget_on_delete(field: FieldSpec) -> Callable[..., None]:
    """A ``post_delete`` receiver that forgets the row's statechart (fenced
    by the version read at delete time; see the module docstring). Also
    connected, by :func:`_connect_proxy`, for proxies of the model."""

    def receiver(sender: Any, instance: models.Model, using: str, **kwargs: Any) -> None:
        if instance.pk is None:
            return
        key = usable_key(instance, field)
        if key is None:
            return  # nothing of the row is in Redis
        try:
            objects = machines[field.machine_name].objects
            record = backend.get_store().load(key)
        except (XsmError, LookupError) as exc:
            logger.warning(_NOT_FORGOTTEN, key, exc)
            return
        if record is None or not objects.owns(record):
            return
        version = record.version

        def forget() -> None:
            try:
                now = backend.get_store().load(key)
                if now is None:
                    return
                if now.version != version or not objects.owns(now):
                    logger.info(
                        "kept %r after its row was deleted: it moved on (v%d -> v%d) before "
                        "the deletion committed (a row re-created with its key, or a send)",
                        key,
                        version,
                        now.version,
                    )
                    return
                # A send between the load above and this erase (a few
                # milliseconds) is not fenced: the store has no
                # compare-and-forget.
                objects.forget(key)
            except XsmError as exc:
                logger.warning(_NOT_FORGOTTEN, key, exc)

        transaction.on_commit(forget, using=using)

    _RECEIVERS.append((post_delete, field, receiver))
    return receiver


def _connect_proxy(sender: type[models.Model], **kwargs: Any) -> None:
    """``class_prepared``: a proxy model's saves and deletions send their
    signals with the proxy as sender; connect its concrete model's receivers."""
    if not sender._meta.proxy:
        return
    concrete = sender._meta.concrete_model
    for signal, field, receiver in _RECEIVERS:
        if field.model is concrete:
            signal.connect(receiver, sender=sender, weak=False)


class_prepared.connect(_connect_proxy, dispatch_uid="django_xsm.fields.lifecycle.proxies")
