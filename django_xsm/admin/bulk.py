"""Bulk sends of the admin: one event to many instances, previewed, then sent once.

The XSM browser (:class:`BulkViews`, ``bulk/``) and
``StatechartAdminMixin``'s changelist actions build :class:`BulkRow` s and
share the steps here: :func:`offered_events` (what every machine of the
selection knows and the user may send), :func:`preview` (a lock-free read
and the engine's ``can()``/``refusal()``; nothing runs) and :func:`send_all`
(each row's strict send under the idempotency key
``xsm-admin-bulk:<token>``, so a retried confirmation applies nothing
twice). At most ``XSM['ADMIN']['BULK_MAX']`` rows (:func:`too_many`); the
event's permission is checked for every row, at preview and at send.
The behaviour, step by step: docs/admin.md ("Bulk sends").
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect

from django_xsm import backend, conf
from django_xsm.exceptions import (
    ConflictError,
    EventNotAcceptedError,
    InvalidConfigError,
    LockTimeoutError,
    StoreUnavailableError,
    XsmError,
)
from django_xsm.fields.events import may_send
from django_xsm.middleware import get_request_info
from django_xsm.models import PERM_SEND, PERM_VIEW
from django_xsm.persistence.arguments import validate_key
from django_xsm.registry import InstanceDoesNotExist, MachineEntry, machines

from .actions import refusal
from .support import PageMixin, actor_of, display_value, logger, require, store_guard

__all__ = [
    "REASON",
    "SENT",
    "UNAVAILABLE",
    "BulkRow",
    "BulkViews",
    "change_text",
    "new_token",
    "offered_events",
    "preview",
    "send_all",
    "summary",
    "too_many",
    "valid_token",
]

#: The transition log's ``reason`` of a bulk send.
REASON = "admin bulk send"
UNAVAILABLE = (
    "The XSM state store is unavailable right now; nothing (more) was sent. Try again "
    "shortly: a send that already went through is not applied twice."
)
_TOKEN = re.compile(r"[0-9a-f]{32}")

# Outcomes: a preview's, then a send's.
ACCEPT, REFUSE, ERROR, SENT, DUPLICATE = "accept", "refuse", "error", "sent", "duplicate"


@dataclass(eq=False, slots=True)
class BulkRow:
    """One selected instance (``target``: the model row, or the key in the
    XSM browser) and what the preview or the send found.

    ``send(event, **options)`` sends to it; ``creates``: a missing instance
    is started by the send (a model row's); ``problem``: why nothing can be
    sent to it at all (gone, unknown machine); ``denied``: why this user
    may not act on it (beyond the event's permission)."""

    label: str
    url: str
    entry: MachineEntry | None
    key: str
    target: Any
    send: Callable[..., Any] | None = None
    creates: bool = False
    problem: str = ""
    denied: str = ""
    outcome: str = ""
    detail: str = ""
    state: str = ""

    def finish(self, outcome: str, detail: str = "") -> None:
        self.outcome, self.detail = outcome, detail


def too_many(count: int, noun: str = "instances") -> str:
    """The admin message for a selection of ``count`` that cannot be sent
    to (none, or over ``BULK_MAX``), else ``""``."""
    if count < 1:
        return f"Select at least one of the {noun} first. Nothing was sent."
    limit = conf.get_settings().admin.bulk_max
    if count > limit:
        return (
            f"{count} {noun} are selected; a bulk send acts on at most {limit} "
            "(XSM['ADMIN']['BULK_MAX']). Select fewer. Nothing was sent."
        )
    return ""


def offered_events(entries: Iterable[MachineEntry], user: Any) -> list[str]:
    """The event types every machine of ``entries`` knows and ``user`` may
    send to each (in the first machine's order); none for no machine. A
    machine's object-level checks are asked about each row at preview and
    at send, not here."""
    distinct = list({e.name: e for e in entries}.values())
    if not distinct:
        return []
    known = [set(e.machine.event_types) for e in distinct[1:]]
    return [
        event
        for event in distinct[0].machine.event_types  # no reserved types, no wildcards
        if all(event in types for types in known)
        and all(may_send(e, event, user, per_object=False) for e in distinct)
    ]


def new_token() -> str:
    """A confirmation's token: the action part of its idempotency keys."""
    return uuid.uuid4().hex


def valid_token(token: str) -> bool:
    """True for what :func:`new_token` makes."""
    return bool(_TOKEN.fullmatch(token))


def _allowed(row: BulkRow, event: str, user: Any) -> bool:
    if row.problem:
        row.finish(ERROR, row.problem)
        return False
    assert row.entry is not None  # a row without a problem has its machine
    if row.denied or not may_send(row.entry, event, user, row.target):
        row.finish(REFUSE, row.denied or f"You may not send {event} to it.")
        return False
    return True


def _snapshot(row: BulkRow, entry: MachineEntry) -> Mapping[str, Any] | None:
    record = backend.get_store().load(row.key)  # no lock: a read
    if record is None:
        if row.creates:  # the send starts it first, as the change page's does
            now = time.time_ns() // 1_000_000
            return entry.machine.initial_snapshot(now=now).snapshot
        row.finish(ERROR, "It is no longer stored (forgotten).")
        return None
    if not entry.objects.owns(record):
        row.finish(ERROR, f"{row.key} belongs to another machine now.")
        return None
    return record.snapshot


def preview(rows: Iterable[BulkRow], event: str, user: Any) -> None:
    """Set each row's outcome to accept, refuse (with the reason) or error;
    ``StoreUnavailableError`` propagates."""
    for row in rows:
        if not _allowed(row, event, user):
            continue
        assert row.entry is not None
        machine = row.entry.machine
        try:
            snapshot = _snapshot(row, row.entry)
            if snapshot is None:
                continue
            row.state = display_value(snapshot.get("value"))
            instance = machine.restore(snapshot)
        except StoreUnavailableError:
            raise
        except XsmError as exc:  # a damaged snapshot, a failed migration
            row.finish(ERROR, exc.message)
            continue
        try:
            accepted = instance.can(event)
        except Exception as exc:  # a guard that needs a payload field
            row.finish(
                REFUSE,
                f"A guard cannot decide without a payload ({type(exc).__name__}: {exc}); "
                "a bulk send carries none.",
            )
            continue
        if accepted:
            row.finish(ACCEPT)
        else:
            row.finish(REFUSE, refusal(machine, snapshot, event))


def send_all(rows: list[BulkRow], event: str, token: str, *, request: HttpRequest) -> bool:
    """Send ``event`` to each row once under the confirmation's ``token``;
    each row ends sent, duplicate (an earlier submission of this token sent
    it), refuse or error. False when the store became unavailable: that
    row and the rest are errors, not sent."""
    options = {
        "idempotency_key": f"xsm-admin-bulk:{token}",
        "actor": actor_of(request),
        "reason": REASON,
        "correlation_id": get_request_info(request).correlation_id,
        "strict": True,  # a refusal raises and says why
    }
    for index, row in enumerate(rows):
        if not _allowed(row, event, request.user):
            continue
        assert row.send is not None
        try:
            receipt = row.send({"type": event}, **options)
        except StoreUnavailableError:
            for rest in rows[index:]:
                rest.finish(ERROR, "Not sent: the state store is unavailable.")
            return False
        except EventNotAcceptedError as exc:
            row.state = display_value(exc.value)
            row.finish(REFUSE, exc.message)
        except InstanceDoesNotExist:
            row.finish(ERROR, "It is no longer stored (forgotten).")
        except (ConflictError, LockTimeoutError):
            row.finish(ERROR, "Busy (locked or changing); not sent. Confirm again to retry.")
        except XsmError as exc:  # another machine's key, a submission in flight...
            row.finish(ERROR, exc.message)
        except Exception as exc:  # an action raised: the block rolled back
            logger.exception("admin bulk send of %s to %r failed", event, row.key)
            row.finish(ERROR, f"{type(exc).__name__}: {exc}; nothing was saved.")
        else:
            row.state = display_value(receipt.value)
            if getattr(receipt, "duplicate", False):
                row.finish(DUPLICATE, "Already sent by this confirmation; not sent again.")
            else:
                row.finish(SENT)
    return True


def summary(rows: Iterable[BulkRow]) -> dict[str, Any]:
    """Counts per outcome, and the refusals' reasons with their counts."""
    rows = list(rows)
    counts = Counter(r.outcome for r in rows)
    reasons = Counter(r.detail for r in rows if r.outcome == REFUSE)
    return {
        "total": len(rows),
        "counts": {k: counts.get(k, 0) for k in (ACCEPT, REFUSE, ERROR, SENT, DUPLICATE)},
        "reasons": reasons.most_common(),
    }


def change_text(event: str, row: BulkRow, token: str) -> str:
    """The admin history's message of a row a bulk send changed."""
    return f"Sent {event} (bulk send {token[:8]}): now {row.state}"


class BulkViews(PageMixin):
    """``bulk/``: the XSM browser's bulk send (POST only, from the list page)."""

    def _bulk_row(self, selected: str) -> BulkRow:
        """A row for ``<machine>:<key>`` (the admin history's object id)."""
        name, _sep, key = selected.partition(":")
        entry = machines.get(name)
        row = BulkRow(label=key or selected, url="", entry=entry, key=key, target=key)
        if entry is None:
            row.problem = f"No machine named {name!r} is registered."
            return row
        try:
            validate_key(key)
        except InvalidConfigError as exc:
            row.problem = exc.message
            return row
        row.url = self.url("detail", name, key=key)
        row.send = lambda event, **options: entry.objects.send(key, event, create=False, **options)
        return row

    @store_guard
    def bulk_view(self, request: HttpRequest) -> HttpResponse:
        require(request, PERM_VIEW, PERM_SEND)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        selected = list(dict.fromkeys(request.POST.getlist("sel")))
        machine = request.POST.get("machine", "")
        back = (
            self.url("machine", machine) if machine in machines else self.url("instance_changelist")
        )
        problem = too_many(len(selected))
        if problem:
            messages.error(request, problem)
            return HttpResponseRedirect(back)
        rows = [self._bulk_row(s) for s in selected]
        events = offered_events([r.entry for r in rows if r.entry is not None], request.user)
        event = request.POST.get("event", "")
        page: dict[str, Any] = {
            "rows": rows,
            "event": event,
            "events": events,
            "action_url": self.url("bulk"),
            "cancel_url": back,
            "hidden": [("machine", machine), *(("sel", s) for s in selected)],
            "crumb": "Bulk send",
            "machine": machines.get(machine),
            "noun": "instances",
        }
        if event not in events:  # none chosen yet (200), or one they may not send (400)
            error = f"{event!r} is not an event you may send to every selected instance's machine."
            return self.render(
                request, "bulk_send.html", "Bulk send", step="choose",
                error=error if event else "", status=400 if event else 200, **page,
            )  # fmt: skip
        title = f"Send {event} to {len(rows)} instances"
        if request.POST.get("step") == "apply":
            token = request.POST.get("token", "")
            if not valid_token(token):
                return self.render(
                    request, "bulk_send.html", title, step="choose", status=400,
                    error="The confirmation is incomplete; preview again.", **page,
                )  # fmt: skip
            if not send_all(rows, event, token, request=request):
                messages.error(request, UNAVAILABLE)
            for row in rows:
                if row.outcome == SENT and row.entry is not None:
                    text = change_text(event, row, token)
                    self.history(request, row.entry.name, row.key, CHANGE, text)
            return self.render(
                request, "bulk_send.html", title, step="results", **summary(rows), **page
            )
        try:
            preview(rows, event, request.user)
        except StoreUnavailableError:
            messages.error(request, UNAVAILABLE)
            return HttpResponseRedirect(back)
        return self.render(
            request, "bulk_send.html", title, step="preview", token=new_token(),
            **summary(rows), **page,
        )  # fmt: skip
