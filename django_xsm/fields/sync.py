"""The reconciler behind ``manage.py xsm_sync_models``.

Redis is the source of truth; a row's state column converges to it. A row
lags when the database transaction around a send rolled back after the
Redis commit (or the process died in between). :func:`sync_field` walks
one field's rows in primary-key order, page by page, and moves every
lagging row forward with the same fenced ``UPDATE`` the field uses, so
running it beside live traffic never moves a row backwards. It also
reports *missing* rows (the row saw a version but Redis has no instance:
Redis lost it or it was forgotten) and *orphans* (Redis instances of the
field's key template whose row no longer exists).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, models

from django_xsm.exceptions import InstanceNotFoundError
from django_xsm.registry import machines

from .field import StatechartField
from .keys import instance_key, key_pattern
from .projection import advance_row, field_move, project_value

__all__ = ["SyncReport", "statechart_fields", "sync_field"]


@dataclass
class SyncReport:
    """What one field's pass found (and did, unless ``dry_run``)."""

    label: str
    rows: int = 0
    repaired: int = 0
    missing: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    forgotten: int = 0
    dry_run: bool = False


def statechart_fields(labels: list[str] | None = None) -> list[StatechartField]:
    """Every ``StatechartField`` of the installed models (or of ``labels``,
    ``app_label.ModelName``; an unknown label is a ``LookupError``)."""
    models_ = [apps.get_model(label) for label in labels] if labels else apps.get_models()
    return [
        f
        for model in models_
        for f in model._meta.local_fields
        if isinstance(f, StatechartField) and not model._meta.abstract
    ]


def _literal_prefix(template: str) -> str:
    return template.split("{", 1)[0]


def _rows(model: type[models.Model], using: str, batch: int) -> Iterator[list[models.Model]]:
    qs = model._base_manager.using(using).order_by("pk")
    last: Any = None
    while True:
        page = list((qs if last is None else qs.filter(pk__gt=last))[:batch])
        if not page:
            return
        yield page
        last = page[-1].pk


def sync_field(
    f: StatechartField,
    *,
    batch: int = 500,
    dry_run: bool = False,
    forget_orphans: bool = False,
    using: str = DEFAULT_DB_ALIAS,
    progress: Callable[[SyncReport], None] | None = None,
) -> SyncReport:
    """Repair lagging rows of ``f`` and report missing rows and orphans (see
    the module docstring). One Redis load per row."""
    model = f.model
    report = SyncReport(f"{model._meta.label}.{f.name}", dry_run=dry_run)
    objects = machines[f.machine_name].objects
    claimed: set[str] = set()
    for page in _rows(model, using, batch):
        for row in page:
            key = instance_key(row, f)
            claimed.add(key)
            report.rows += 1
            try:
                view = objects.get(key)
            except InstanceNotFoundError:
                if int(getattr(row, f.version_attname) or 0) > 0:
                    report.missing.append(key)
                continue
            if view.version > int(getattr(row, f.version_attname) or 0):
                report.repaired += 1
                if not dry_run:
                    move = field_move(f, project_value(view.value), view.version, using)
                    advance_row(model, row.pk, **move)
        if progress is not None:
            progress(report)
    claimed |= _claimed_by_other_fields(f, using)
    pattern = key_pattern(f.key_template)[0]
    for key in objects.keys(_literal_prefix(f.key_template)):
        if pattern.fullmatch(key) and key not in claimed:
            report.orphans.append(key)
    if forget_orphans and not dry_run:
        for key in report.orphans:
            objects.forget(key)
            report.forgotten += 1
    return report


def _claimed_by_other_fields(f: StatechartField, using: str) -> set[str]:
    """Keys of rows of other fields on the same machine whose templates can
    produce keys of ``f``'s template: such an instance is not an orphan."""
    pattern = key_pattern(f.key_template)[0]
    claimed: set[str] = set()
    for other in statechart_fields():
        if other is f or other.machine_name != f.machine_name:
            continue
        for page in _rows(other.model, using, 1000):
            claimed.update(k for row in page if pattern.fullmatch(k := instance_key(row, other)))
    return claimed
