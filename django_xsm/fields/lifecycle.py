"""What a row's lifecycle does to its statechart: deletion.

With ``on_delete="forget"`` (the default) deleting a row erases its Redis
instance and transition log once the deletion commits (through
``transaction.on_commit``: a rolled-back delete erases nothing). The
erase is fenced: the instance's version is read when the row is deleted,
and on commit the instance is erased only if it is still at that
version. A row re-created with the same key in the same transaction (a
"replace") that sends before the commit keeps its statechart. If Redis is
unreachable at either moment, the instance stays behind as an orphan that
``manage.py xsm_sync_models`` reports and ``--forget-orphans`` erases.

Deleting through a proxy model forgets too: the receiver is connected for
every proxy of the field's model as it is defined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import models, transaction
from django.db.models.signals import class_prepared, post_delete

from django_xsm import backend
from django_xsm.exceptions import InvalidConfigError, UnsavedInstanceError, XsmError
from django_xsm.persistence.base import validate_key
from django_xsm.registry import machines

from .keys import FieldSpec, instance_key

__all__ = ["forget_on_delete"]

logger = logging.getLogger("django_xsm.fields")

#: (field, receiver) of every field that forgets on delete: a proxy of the
#: field's (concrete) model defined later gets the same receivers.
_RECEIVERS: list[tuple[FieldSpec, Callable[..., None]]] = []

_LATER = "'manage.py xsm_sync_models --forget-orphans' erases it later"


def forget_on_delete(field: FieldSpec) -> Callable[..., None]:
    """A ``post_delete`` receiver that forgets the row's statechart (fenced
    by the version read at delete time; see the module docstring). Also
    connected, by :func:`_connect_proxy`, for proxies of the model."""

    def receiver(sender: Any, instance: models.Model, using: str, **kwargs: Any) -> None:
        if instance.pk is None:
            return
        try:
            key = validate_key(instance_key(instance, field))
        except (UnsavedInstanceError, InvalidConfigError):
            return  # the row never had a usable key: nothing of it is in Redis
        try:
            objects = machines[field.machine_name].objects
            record = backend.get_store().load(key)
        except (XsmError, LookupError) as exc:
            logger.warning(
                "could not forget %r after its row was deleted (%s); %s", key, exc, _LATER
            )
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
                logger.warning(
                    "could not forget %r after its row was deleted (%s); %s", key, exc, _LATER
                )

        transaction.on_commit(forget, using=using)

    _RECEIVERS.append((field, receiver))
    return receiver


def _connect_proxy(sender: type[models.Model], **kwargs: Any) -> None:
    """``class_prepared``: a proxy model's deletions send ``post_delete``
    with the proxy as sender; connect its concrete model's receivers."""
    if not sender._meta.proxy:
        return
    concrete = sender._meta.concrete_model
    for field, receiver in _RECEIVERS:
        if field.model is concrete:
            post_delete.connect(receiver, sender=sender, weak=False)


class_prepared.connect(_connect_proxy, dispatch_uid="django_xsm.fields.lifecycle.proxies")
