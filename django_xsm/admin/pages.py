"""The admin's read-only pages: machines, instances of a machine, one instance.

Listing pages through the store's lexicographic indexes with a cursor
(``InstanceManager.page`` -> ``store.list_page``): one call per page plus one
``load`` per row shown, whatever the namespace holds; never a keyspace scan.
"""

from __future__ import annotations

import time
from typing import Any

from django.contrib.admin.utils import unquote
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from django_xsm import backend, conf
from django_xsm.engine import Machine
from django_xsm.exceptions import StoreUnavailableError, XsmError
from django_xsm.fields.events import available_events, may_send
from django_xsm.managers import InstanceView
from django_xsm.models import PERM_FIRE, PERM_FORGET, PERM_SEND, PERM_VIEW
from django_xsm.operations import dead_letter_reasons
from django_xsm.persistence.records import TimerFailure
from django_xsm.persistence.timer_state import INSTANCE_FAILURE, failure_key
from django_xsm.registry import InstanceDoesNotExist, MachineEntry, machines

from .bulk import offered_events
from .diagram import render_svg, short_id
from .support import (
    OUTBOX_OBJECT_ID,
    PageMixin,
    display_json,
    display_value,
    ms_datetime,
    query_int,
    require,
    store_guard,
)

__all__ = ["ReadViews", "deadline_rows", "log_page"]

PAGE_SIZE = 25
MAX_PAGE_SIZE = 200
LOG_PAGE = 20
DEAD_LETTERS_SHOWN = 50


def deadline_rows(
    machine: Machine, view: InstanceView
) -> tuple[list[dict[str, Any]], TimerFailure | None]:
    """The pending deadlines for display (soonest first, with their retry
    bookkeeping) and the failure of the instance as a whole, if any."""
    now_ms = time.time_ns() // 1_000_000
    failures = dict(view.timer_failures)
    rows = []
    for d in sorted(view.deadlines, key=lambda d: (d.due_ms, d.entry)):
        failure = failures.get(failure_key(d))
        rows.append(
            {
                "state": short_id(machine, d.state_id),
                "event": d.event_type,
                "delay": d.delay,
                "due": ms_datetime(d.due_ms),
                "overdue": d.due_ms <= now_ms,
                "failure": failure,
                "next_attempt": ms_datetime(failure.next_attempt_ms) if failure else None,
            }
        )
    return rows, failures.get(INSTANCE_FAILURE)


def _next_deadline(view: InstanceView) -> dict[str, Any] | None:
    if not view.deadlines:
        return None
    failures = view.timer_failures
    first = min(view.deadlines, key=lambda d: d.due_ms)
    failure = failures.get(failure_key(first)) or failures.get(INSTANCE_FAILURE)
    return {"due": ms_datetime(first.due_ms), "dead": bool(failure and failure.dead)}


class ReadViews(PageMixin):
    """Pages every user with ``view_instance`` may open."""

    @store_guard
    def machines_view(self, request: HttpRequest) -> HttpResponse:
        require(request, PERM_VIEW)
        rows = [
            {
                "name": e.name,
                "id": e.machine.id,
                "version": e.machine.version,
                "states": len(e.machine.nodes) - 1,
                "url": self.url("machine", e.name),
            }
            for e in machines.values()
        ]
        current = backend.get_backend()
        dead = [
            {"key": key, "since": ms_datetime(ms), "url": self.url("find", key=key)}
            for key, ms in current.store.dead_letters(limit=DEAD_LETTERS_SHOWN)
        ]
        return self.render(
            request,
            "machines.html",
            "XSM machines",
            machines=rows,
            problems=machines.problems,
            dead_letters=dead,
            store=current.description,
            find_url=self.url("find"),
            outbox_url=self.url("outbox"),
        )

    @store_guard
    def find_view(self, request: HttpRequest) -> HttpResponse:
        """``find/?key=...``: the instance page of whatever machine owns it."""
        require(request, PERM_VIEW)
        key = request.GET.get("key", "")
        invalid = self.bad_key(request, key)
        if invalid is not None:
            return invalid
        record = backend.get_store().load(key)
        name = machines.name_for_machine_id(record.owner) if record else None
        if name is None:
            return self.render(request, "missing.html", "No such instance", status=404, key=key)
        return HttpResponseRedirect(self.url("detail", name, key=key))

    def change_redirect(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """``<machine>:<key>/change/`` (or ``outbox/change/``): where admin
        history entries link to."""
        require(request, PERM_VIEW)
        if unquote(object_id) == OUTBOX_OBJECT_ID:  # a redrive of every dead letter
            return HttpResponseRedirect(self.url("outbox"))
        name, sep, key = unquote(object_id).partition(":")
        if not sep or name not in machines:
            raise Http404("No such instance")
        return HttpResponseRedirect(self.url("detail", name, key=key))

    @store_guard
    def list_view(self, request: HttpRequest, machine: str) -> HttpResponse:
        require(request, PERM_VIEW)
        entry = machines[machine]
        q = request.GET.get("q", "")
        state = request.GET.get("state", "")
        after = request.GET.get("after", "")
        limit = query_int(request.GET.get("limit"), PAGE_SIZE, 1, MAX_PAGE_SIZE)
        states = [n.id for n in entry.machine.nodes if n.parent is not None and n.type != "history"]
        if state and state not in states:
            state = ""
        # A search is a prefix search: a trailing * adds nothing; other glob
        # characters (* ? [ ]) are plain characters of the key.
        prefix = q.rstrip("*")
        if prefix and self.bad_key(request, prefix) is not None:
            keys: list[str] = []
            cursor = ""  # no key holds control characters: nothing can match
        else:
            keys, cursor = entry.objects.page(prefix, after=after, limit=limit, state=state or None)
            namespaced = f"{entry.name}:{prefix}"
            if not keys and not after and prefix and not prefix.startswith(f"{entry.name}:"):
                # "a" finds "order:a..." when no key starts with "a" itself;
                # one more index read, only when the first found nothing.
                keys, cursor = entry.objects.page(namespaced, limit=limit, state=state or None)
                if keys:
                    prefix = namespaced
        rows = []
        for key in keys:
            row: dict[str, Any] = {"key": key, "url": self.url("detail", machine, key=key)}
            try:
                view = entry.objects.get(key)
            except InstanceDoesNotExist:
                continue  # forgotten between the index read and the load
            except StoreUnavailableError:
                raise
            except XsmError as exc:
                row["error"] = exc.message
            else:
                row.update(
                    state=display_value(view.value),
                    status=view.status,
                    version=view.version,
                    updated=view.updated_at,
                    next=_next_deadline(view),
                )
            rows.append(row)
        can_bulk = request.user.has_perm(PERM_SEND)
        # The pages after this one search the prefix this one found.
        page = {"q": prefix, "state": state, "limit": limit if limit != PAGE_SIZE else ""}
        return self.render(
            request,
            "instances.html",
            f"{machine} instances",
            machine=entry,
            rows=rows,
            q=q,
            searched=prefix if prefix != q else "",
            state=state,
            states=[(s, short_id(entry.machine, s)) for s in states],
            next_url=self.url("machine", machine, after=cursor, **page) if cursor else "",
            first_url=self.url("machine", machine, **page) if after else "",
            can_bulk=can_bulk,
            bulk_events=offered_events([entry], request.user) if can_bulk else [],
            bulk_url=self.url("bulk"),
            bulk_max=conf.get_settings().admin.bulk_max,
        )

    @store_guard
    def detail_view(self, request: HttpRequest, machine: str) -> HttpResponse:
        require(request, PERM_VIEW)
        entry, key = self.target(request, machine)
        try:
            view = entry.objects.get(key)
        except InstanceDoesNotExist:
            return self.missing(request, entry, key)
        except StoreUnavailableError:
            raise
        except XsmError as exc:
            return self.unreadable(request, key, exc, dead_letter_reasons([key]).get(key, ""))
        deadlines, blanket = deadline_rows(entry.machine, view)
        user = request.user
        finished = view.status == "done"
        timeline = self.timeline(request, entry, key)
        return self.render(
            request,
            "instance.html",
            key,
            machine=entry,
            key=key,
            view=view,
            state=display_value(view.value),
            state_ids=[short_id(entry.machine, s) for s in view.state_ids if s != entry.machine.id],
            context_json=display_json(view.context),
            stale_version=view.machine_version != entry.machine.version,
            deadlines=deadlines,
            instance_failure=blanket,
            # the arrows the records shown in the log below took, numbered
            diagram=render_svg(entry.machine, view.state_ids, timeline["records"]),
            # The model field's list (accepted, or conditional: a guard that
            # needs a payload decides); links only to the events the
            # machine's PERMISSIONS let this user send to this key.
            accepted_now=available_events(entry, view),
            sendable=[e for e in entry.machine.event_types if may_send(entry, e, user, key)],
            timeline=timeline,
            finished=finished,
            can_send=user.has_perm(PERM_SEND) and not finished,
            can_fire=user.has_perm(PERM_FIRE) and not finished,
            can_forget=user.has_perm(PERM_FORGET),
            send_url=self.url("send", machine, key=key),
            fire_url=self.url("fire", machine, key=key),
            forget_url=self.url("forget", machine, key=key),
            outbox_url=self.url("outbox"),
        )

    def timeline(self, request: HttpRequest, entry: MachineEntry, key: str) -> dict[str, Any]:
        """One page of the transition log (:func:`log_page`) with its links."""
        found = log_page(entry, key, request.GET.get("after_seq", ""))

        def link(after_seq: str | None) -> str:
            if after_seq is None:
                return ""
            return self.url("detail", entry.name, key=key, after_seq=after_seq or None)

        return {
            "rows": found["rows"],
            "records": found["records"],
            "older_url": link(found["older"]),
            "newer_url": link(found["newer"]),
            "latest_url": link(found["latest"]),
        }


def log_page(entry: MachineEntry, key: str, after_seq: str) -> dict[str, Any]:
    """One page of ``key``'s transition log for display: the newest
    ``LOG_PAGE`` records, or those after ``after_seq`` (the ``?after_seq=``
    text; oldest first within the page). ``rows`` are redacted;
    ``older``/``newer`` are the ``after_seq`` of the neighbouring pages and
    ``latest`` is ``""`` (the newest page) when this is an older one; each
    is None when there is no such page; ``records`` are the page's records
    as read (for the diagram's path: their states and events)."""
    after = int(after_seq) if after_seq.isdecimal() and len(after_seq) < 19 else None
    if after is None:
        records = entry.objects.latest(key, LOG_PAGE)
        newer = False
    else:
        found = entry.objects.history(key, after_seq=after, limit=LOG_PAGE + 1)
        records, newer = found[:LOG_PAGE], len(found) > LOG_PAGE
    start = records[0].seq - 1 if records else (after or 0)
    rows = [
        {
            "seq": r.seq,
            "time": r.timestamp,
            "actor": r.actor,
            "event": r.event_type,
            "from": display_value(r.from_state),
            "to": display_value(r.to_state),
            "reason": r.reason,
            "correlation_id": r.correlation_id,
            "idempotency_key": r.idempotency_key,
            "version": r.version,
            "accepted": r.accepted,
            "payload": display_json(r.payload) if r.payload else "",
        }
        for r in records
    ]
    return {
        "rows": rows,
        "records": records,
        "older": str(max(0, start - LOG_PAGE)) if start > 0 else None,
        "newer": str(rows[-1]["seq"]) if newer and rows else None,
        "latest": "" if after is not None else None,
    }
