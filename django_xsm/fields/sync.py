"""The reconciler behind ``manage.py xsm_sync_models`` (docs/models.md,
"The reconciler"; docs/commands.md): moves lagging rows forward with the
field's fenced ``UPDATE``, creates the instances of rows that have none
(:meth:`BoundStatechart.create`) and reports what it cannot repair.
Orphans are found by listing the candidate keys *first* and walking the
rows after, so a row created during the pass is seen by the walk; an
erase is fenced (see :func:`_forget_orphans`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, DatabaseError, models, router, transaction

from django_xsm import backend
from django_xsm.exceptions import InstanceNotFoundError, StoreUnavailableError, XsmError
from django_xsm.registry import machines

from .bound import BoundStatechart
from .field import StatechartField
from .keys import key_pattern, row_lookup, usable_key
from .projection import advance_row, field_move, project_value

__all__ = ["SyncReport", "statechart_fields", "sync_field"]


@dataclass
class SyncReport:
    """What one field's pass found (and did, unless ``dry_run``)."""

    label: str
    rows: int = 0
    repaired: int = 0
    #: keys of the instances created (``dry_run``: that would be created)
    created: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)
    #: rows without a usable key, by primary key (``repr``)
    unkeyed: list[str] = field(default_factory=list)
    #: ``(key, reason)`` of rows whose load or ``UPDATE`` failed
    failed: list[tuple[str, str]] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    forgotten: int = 0
    #: orphans left alone: claimed again, changed, or younger than the minimum age
    kept: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def findings(self) -> bool:
        """Anything ``--check`` reports: lagging, uncreated, missing, ahead
        or orphaned."""
        return bool(self.repaired or self.created or self.missing or self.ahead or self.orphans)


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


def _version(row: models.Model, f: StatechartField) -> int:
    return int(getattr(row, f.version_attname) or 0)


def sync_field(
    f: StatechartField,
    *,
    batch: int = 500,
    dry_run: bool = False,
    forget_orphans: bool = False,
    orphan_min_age_s: float = 0.0,
    using: str = DEFAULT_DB_ALIAS,
    progress: Callable[[SyncReport], None] | None = None,
) -> SyncReport:
    """Repair lagging rows of ``f``, create the instances of rows that have
    none, and report what cannot be repaired (see the module docstring).
    One Redis load per row, two round trips more per instance created.
    ``orphan_min_age_s``: ``forget_orphans`` leaves instances committed
    less than that many seconds ago (a row created in a transaction that
    has not committed yet looks exactly like an orphan)."""
    model = f.model
    report = SyncReport(f"{model._meta.label}.{f.name}", dry_run=dry_run)
    objects = machines[f.machine_name].objects
    pattern = key_pattern(f.key_template)[0]
    # Listed before the rows are walked: a row created after this listing
    # is either walked below or its key is not a candidate.
    candidates = [k for k in objects.keys(_literal_prefix(f.key_template)) if pattern.fullmatch(k)]
    claimed: set[str] = set()
    for page in _rows(model, using, batch):
        for row in page:
            report.rows += 1
            key = usable_key(row, f)
            if key is None:
                report.unkeyed.append(repr(row.pk))
                continue
            claimed.add(key)
            _sync_row(f, row, key, report, using)
        if progress is not None:
            progress(report)
    candidates = [k for k in candidates if k not in claimed]
    if candidates:
        claimed |= _claimed_by_other_fields(f, using)
    report.orphans = [k for k in candidates if k not in claimed]
    if forget_orphans and not dry_run and report.orphans:
        _forget_orphans(f, report, using, orphan_min_age_s)
    return report


def _sync_row(
    f: StatechartField, row: models.Model, key: str, report: SyncReport, using: str
) -> None:
    objects = machines[f.machine_name].objects
    seen = _version(row, f)
    try:
        view = objects.get(key)
    except InstanceNotFoundError:
        if seen > 0:
            report.missing.append(key)
        else:
            _create(f, row, key, report)
        return
    except StoreUnavailableError:
        raise  # Redis is down: every other row would fail the same way
    except XsmError as exc:  # an unreadable record: this row only
        report.failed.append((key, f"{type(exc).__name__}: {exc}"))
        return
    if view.version < seen:
        report.ahead.append(key)
        return
    if view.version == seen:
        return
    report.repaired += 1
    if report.dry_run:
        return
    move = field_move(f, project_value(view.value), view.version, using)
    try:
        # A savepoint: a failing UPDATE (a state longer than the column, a
        # deadlock) must not abort the caller's transaction on PostgreSQL.
        with transaction.atomic(using=using):
            advance_row(f.model, row.pk, **move)
    except DatabaseError as exc:
        report.repaired -= 1
        report.failed.append((key, f"{type(exc).__name__}: {exc}".splitlines()[0]))


def _create(f: StatechartField, row: models.Model, key: str, report: SyncReport) -> None:
    """Create the instance of a row that never had one (unless a dry run)."""
    if report.dry_run:
        report.created.append(key)
        return
    try:
        made = BoundStatechart(row, f).create()
    except StoreUnavailableError:
        raise  # Redis is down: every other row would fail the same way
    except Exception as exc:  # an entry action raised, an unstorable context: this row only
        report.failed.append((key, f"{type(exc).__name__}: {exc}".splitlines()[0]))
        return
    if made:  # else its own creation or a first send stored it meanwhile
        report.created.append(key)


def _claimants(f: StatechartField) -> list[tuple[StatechartField, str | None]]:
    """The fields of ``f``'s machine whose rows may own ``f``'s keys, each
    with the database its rows are read from (``None``: ``f``'s own)."""
    out: list[tuple[StatechartField, str | None]] = [(f, None)]
    for other in statechart_fields():
        if other is not f and other.machine_name == f.machine_name:
            same = other.model is f.model
            out.append((other, None if same else router.db_for_read(other.model)))
    return out


def _claimed_by_other_fields(f: StatechartField, using: str) -> set[str]:
    """Keys of rows of other fields on the same machine whose templates can
    produce keys of ``f``'s template: such an instance is not an orphan.
    Each model is read from the database the router reads it from."""
    pattern = key_pattern(f.key_template)[0]
    return {
        key
        for other, routed in _claimants(f)[1:]
        for key in _row_keys(other, routed or using)
        if pattern.fullmatch(key)
    }


def _row_keys(f: StatechartField, using: str) -> Iterator[str]:
    """The usable keys of every row of ``f``'s model in ``using``."""
    for page in _rows(f.model, using, 1000):
        yield from (key for row in page if (key := usable_key(row, f)) is not None)


def _claimed_now(f: StatechartField, keys: list[str], using: str) -> set[str]:
    """Which of ``keys`` a row claims *now* (asked again of the database):
    one query per key and field whose template has one placeholder, one
    walk of the rows of a field whose template has several."""
    claimed: set[str] = set()
    for other, routed in _claimants(f):
        db = routed or using
        manager = other.model._base_manager.db_manager(db)
        if len(key_pattern(other.key_template)[1]) > 1:
            claimed.update(set(keys).intersection(_row_keys(other, db)))
            continue
        for key in keys:
            lookup = row_lookup(other, key)
            if key not in claimed and lookup is not None and manager.filter(**lookup).exists():
                claimed.add(key)
    return claimed


def _forget_orphans(f: StatechartField, report: SyncReport, using: str, min_age_s: float) -> None:
    """Erase the orphans, fenced: each one's version is read first, then
    the database is asked again whether a row claims its key (a row
    created since the walk), and the instance is erased only when its
    version is still the one read. A send between that last read and the
    erase (a few milliseconds) is the one window left: the store has no
    compare-and-forget."""
    objects = machines[f.machine_name].objects
    store = backend.get_store()
    now_ms = time.time() * 1000
    read: dict[str, int] = {}
    for key in report.orphans:
        record = store.load(key)
        if record is None or not objects.owns(record):
            continue  # gone already, or another machine's now
        if now_ms - record.updated_ms < min_age_s * 1000:
            report.kept.append(key)
            continue
        read[key] = record.version
    again = _claimed_now(f, list(read), using)
    for key, version in read.items():
        if key in again:
            report.kept.append(key)
            continue
        record = store.load(key)
        if record is None:
            continue
        if record.version != version or not objects.owns(record):
            report.kept.append(key)
            continue
        store.forget(key)
        report.forgotten += 1
