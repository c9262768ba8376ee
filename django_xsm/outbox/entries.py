"""What is in the outbox and what an operator does about it (``xsm_outbox``,
the admin): listings, health, redrive and purge of dead letters.

Listings show events redacted like the transition log (the built-in
denylist plus ``AUDIT['REDACT']``): they end up in terminals and tickets.
Machines are shown by their registered name (the stored machine id when
it is not configured any more).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from django_xsm import conf
from django_xsm.backend.build import get_outbox
from django_xsm.exceptions import StoreError
from django_xsm.persistence.audit import DEFAULT_REDACT, redact
from django_xsm.persistence.outbox import OutboxEntry
from django_xsm.registry import machines

from .times import iso, now_ms

__all__ = [
    "dead_letter_ids",
    "list_entries",
    "outbox_health",
    "purge_dead",
    "redrive",
    "redrive_all",
]

#: Dead letters read per round trip while looking one up.
_PAGE = 500


def _redacted(event: Mapping[str, Any]) -> Any:
    try:
        return redact(dict(event), [*DEFAULT_REDACT, *conf.get_settings().audit.redact])
    except ValueError:  # nested past the depth cap: show nothing rather than fail
        return {"type": str(event.get("type", ""))}


def _entry(entry: OutboxEntry, state: str) -> dict[str, Any]:
    return {
        "state": state,
        "delivery_id": entry.delivery_id,
        "key": entry.key,
        "machine": machines.name_for_machine_id(entry.machine, entry.machine),
        "version": entry.version,
        "event_type": entry.event_type,
        "event": _redacted(entry.event),
        "attempts": entry.attempts,
        "last_error": entry.last_error,
        "emitted_at": iso(entry.emitted_ms) if entry.emitted_ms else None,
    }


def list_entries(*, limit: int = 100) -> dict[str, Any]:
    """``stats`` (:func:`outbox_health`'s numbers) and up to ``limit``
    entries of each kind, oldest first: ``pending`` (in the streams, with
    the consumer holding each, '' when nobody has it yet, and its idle
    time), ``retrying`` (waiting for their retry time) and ``dead``."""
    outbox = get_outbox()
    now = now_ms()
    pending = [
        {**_entry(entry, "pending"), "consumer": who, "idle_ms": idle}
        for entry, who, idle in outbox.pending(limit=limit)
    ]
    retrying = [
        {**_entry(entry, "retrying"), "retry_at": iso(due), "retry_in_ms": due - now}
        for entry, due in outbox.waiting(limit=limit)
    ]
    dead = [
        {**_entry(d.entry, "dead"), "dead_at": iso(d.dead_ms)}
        for d in outbox.dead_letters(limit=limit)
    ]
    return {"stats": outbox.stats(), "pending": pending, "retrying": retrying, "dead": dead}


def outbox_health() -> dict[str, Any]:
    """``{"ok", "pending", "retrying", "dead", "lag_ms", "error"}`` — one
    pipelined round trip; never raises for a store problem (``ok`` False,
    the numbers None, ``error`` says why), so a page or probe can show it.
    ``lag_ms`` is the age of the oldest undelivered entry: the number to
    alert on, with ``dead`` above 0."""
    try:
        stats = get_outbox().stats()
    except StoreError as exc:
        numbers = dict.fromkeys(("pending", "retrying", "dead", "lag_ms"))
        return {"ok": False, **numbers, "error": exc.message}
    return {"ok": True, **stats, "error": None}


def dead_letter_ids(*, limit: int | None = None) -> list[str]:
    """Delivery ids of the dead letters, oldest first (what a redrive of
    all would move: entries damaged past having an id are left out)."""
    outbox = get_outbox()
    found: list[str] = []
    after = ""
    while limit is None or len(found) < limit:
        page = outbox.dead_letters(limit=_PAGE, after=after)
        found += [d.entry.delivery_id for d in page if d.entry.delivery_id]
        if len(page) < _PAGE:
            break
        after = page[-1].cursor
    return found if limit is None else found[:limit]


def redrive(delivery_id: str, *, dry_run: bool = False) -> bool:
    """Move the dead letter ``delivery_id`` back into the outbox, its
    attempts starting again from 0 and its delivery id unchanged (so
    downstream idempotency still recognises it); False when there is no
    such dead letter. ``dry_run``: only look it up."""
    if dry_run:
        return delivery_id in dead_letter_ids()
    return get_outbox().redrive(delivery_id)


def redrive_all(*, dry_run: bool = False, limit: int | None = None) -> int:
    """Redrive every dead letter (up to ``limit``); how many moved (would move)."""
    if dry_run:
        return len(dead_letter_ids(limit=limit))
    return get_outbox().redrive_all(limit=limit)


def purge_dead(older_than: _dt.timedelta, *, dry_run: bool = False) -> int:
    """Remove the dead letters that died more than ``older_than`` ago (by
    the Redis server's clock); how many went (would go)."""
    ms = int(older_than.total_seconds() * 1000)
    return get_outbox().purge_dead(older_than_ms=ms, dry_run=dry_run)
