"""What a row's lifecycle does to its statechart: deletion.

With ``on_delete="forget"`` (the default) deleting a row erases its Redis
instance and transition log once the deletion commits (through
``transaction.on_commit``: a rolled-back delete erases nothing). If Redis
is unreachable then, the instance stays behind as an orphan that
``manage.py xsm_sync_models`` reports and ``--forget-orphans`` erases.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import models, transaction

from django_xsm.exceptions import XsmError
from django_xsm.registry import machines

from .keys import FieldSpec, instance_key

__all__ = ["forget_on_delete"]

logger = logging.getLogger("django_xsm.fields")


def forget_on_delete(field: FieldSpec) -> Callable[..., None]:
    """A ``post_delete`` receiver that forgets the row's statechart."""

    def receiver(sender: Any, instance: models.Model, using: str, **kwargs: Any) -> None:
        if instance.pk is None:
            return
        key = instance_key(instance, field)

        def forget() -> None:
            try:
                machines[field.machine_name].objects.forget(key)
            except XsmError as exc:
                logger.warning(
                    "could not forget %r after its row was deleted (%s); "
                    "'manage.py xsm_sync_models --forget-orphans' erases it later",
                    key,
                    exc,
                )

        transaction.on_commit(forget, using=using)

    return receiver
