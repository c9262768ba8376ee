"""The admin's Outbox page: what workers still have to deliver, and redrives.

The page reads the backend's :class:`~django_xsm.persistence.outbox.OutboxReader`
through its bounded listings only (``stats()``, one cursor-paged page of
``dead_letters()``, the first entries of ``waiting()`` and ``pending()``):
never a scan. *Redrive* (one dead letter) and *Redrive all* need
``view_instance`` and ``redrive_outbox``, are confirmed on a page of their
own, POST only, and recorded in the admin history. What it shows:
docs/admin.md ("The Outbox page").
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from django_xsm.backend.build import get_outbox
from django_xsm.exceptions import InvalidConfigError
from django_xsm.models import PERM_REDRIVE, PERM_VIEW
from django_xsm.persistence.outbox import DeadLetter, OutboxEntry, OutboxReader
from django_xsm.registry import machines

from .support import OUTBOX_OBJECT_ID, PageMixin, ms_datetime, query_int, require, store_guard

__all__ = [
    "OutboxViews",
    "cursor_before",
    "find_dead_letter",
]

DEAD_PAGE = 25
MAX_DEAD_PAGE = 200
WAITING_SHOWN = 50
PENDING_SHOWN = 25
#: Where a dead letter sits: ``<stream id>/<bucket>`` (``DeadLetter.cursor``).
_AT = re.compile(r"(\d{1,20})-(\d{1,20})/(\d{1,6})")
#: The ``?after=`` of a page: a ``DeadLetter.cursor``.
_CURSOR = re.compile(r"(\d{1,20})-(\d{1,20})(?:/\d{1,6})?")
#: The largest part of a stream id (64-bit unsigned).
_MAX_SEQ = 2**64 - 1


def _stream_id(match: re.Match[str] | None) -> str | None:
    """The stream id of a matched cursor, None when it cannot be one."""
    if match is None or int(match[1]) > _MAX_SEQ or int(match[2]) > _MAX_SEQ:
        return None
    return f"{int(match[1])}-{int(match[2])}"


def cursor_before(stream_id: str, bucket: int) -> str:
    """The ``after=`` from which ``dead_letters()`` starts with the letter
    at ``stream_id`` in ``bucket``: letters are ordered by (stream id,
    bucket), and a cursor ``<id>/<b>`` reads ``<id>`` itself only in the
    buckets after ``b``, a bare id in none."""
    ms_text, _, seq_text = stream_id.partition("-")
    ms, seq = int(ms_text), int(seq_text)
    if bucket > 0:
        return f"{stream_id}/{bucket - 1}"
    if seq > 0:
        return f"{ms}-{seq - 1}"
    return f"{ms - 1}-{_MAX_SEQ}" if ms > 0 else ""


def find_dead_letter(outbox: OutboxReader, at: str) -> DeadLetter | None:
    """The dead letter whose ``cursor`` is ``at``, if it is still there:
    one pipelined read of one entry per bucket (no scan)."""
    found = _AT.fullmatch(at)
    stream_id = _stream_id(found)
    if found is None or stream_id is None:
        return None
    bucket = int(found[3])
    for letter in outbox.dead_letters(limit=1, after=cursor_before(stream_id, bucket)):
        if letter.stream_id == stream_id and letter.bucket == bucket:
            return letter
    return None


class OutboxViews(PageMixin):
    """The Outbox page and its two actions."""

    def _row(self, entry: OutboxEntry, **extra: Any) -> dict[str, Any]:
        name = machines.name_for_machine_id(entry.machine)  # None: not registered now
        if name is None:
            url = self.url("find", key=entry.key)
        else:
            url = self.url("detail", name, key=entry.key)
        return {
            "delivery_id": entry.delivery_id,
            "key": entry.key,
            "machine": entry.machine if name is None else name,
            "url": url,
            "version": entry.version,
            "event_type": entry.event_type or "—",
            "attempts": entry.attempts,
            "error": entry.last_error,
            "emitted": ms_datetime(entry.emitted_ms) if entry.emitted_ms else None,
            **extra,
        }

    def _letter_row(self, letter: DeadLetter) -> dict[str, Any]:
        return self._row(
            letter.entry,
            dead=ms_datetime(letter.dead_ms),
            # a damaged entry without a delivery id cannot be redriven
            redrive_url=self.url("outbox_redrive", at=letter.cursor)
            if letter.entry.delivery_id
            else "",
        )

    @store_guard
    def outbox_view(self, request: HttpRequest) -> HttpResponse:
        require(request, PERM_VIEW)
        after = request.GET.get("after", "")
        if _stream_id(_CURSOR.fullmatch(after)) is None:
            after = ""  # not a cursor of this page: start over
        limit = query_int(request.GET.get("limit"), DEAD_PAGE, 1, MAX_DEAD_PAGE)
        outbox = get_outbox()
        stats = outbox.stats()
        try:
            letters = outbox.dead_letters(limit=limit + 1, after=after)
        except InvalidConfigError:
            after, letters = "", outbox.dead_letters(limit=limit + 1)
        more = len(letters) > limit
        letters = letters[:limit]
        page_limit = limit if limit != DEAD_PAGE else ""
        next_url = self.url("outbox", after=letters[-1].cursor, limit=page_limit) if more else ""
        return self.render(
            request,
            "outbox.html",
            "XSM outbox",
            crumb="Outbox",
            stats=stats,
            lag_s=stats["lag_ms"] / 1000,
            dead_letters=[self._letter_row(d) for d in letters],
            waiting=[
                self._row(e, due=ms_datetime(ms)) for e, ms in outbox.waiting(limit=WAITING_SHOWN)
            ],
            pending=[
                self._row(e, consumer=who, idle_s=idle / 1000)
                for e, who, idle in outbox.pending(limit=PENDING_SHOWN)
            ],
            waiting_shown=WAITING_SHOWN,
            pending_shown=PENDING_SHOWN,
            can_redrive=request.user.has_perm(PERM_REDRIVE),
            redrive_all_url=self.url("outbox_redrive_all"),
            next_url=next_url,
            first_url=self.url("outbox", limit=page_limit) if after else "",
        )

    def _to_outbox(self) -> HttpResponse:
        return HttpResponseRedirect(self.url("outbox"))

    @store_guard
    def outbox_redrive_view(self, request: HttpRequest) -> HttpResponse:
        """``outbox/redrive/?at=<cursor>``: confirm (GET), then redrive (POST)
        the dead letter at that place, back into the outbox with its
        attempts reset and the same delivery id."""
        require(request, PERM_VIEW, PERM_REDRIVE)
        outbox = get_outbox()
        at = request.GET.get("at", "")
        letter = find_dead_letter(outbox, at)
        if letter is None:
            messages.warning(
                request,
                "That dead letter is no longer there (redriven or purged meanwhile). "
                "Nothing was changed.",
            )
            return self._to_outbox()
        row = self._letter_row(letter)
        if not letter.entry.delivery_id:
            messages.warning(
                request,
                "That dead letter is damaged (it has no delivery id), so it cannot be "
                f"redriven: {letter.entry.last_error[:200]}",
            )
            return self._to_outbox()
        if request.method != "POST":
            return self.render(
                request,
                "outbox_redrive_confirm.html",
                f"Redrive {letter.entry.delivery_id}?",
                crumb="Redrive",
                crumb_parent=("Outbox", self.url("outbox")),
                letter=row,
                action_url=self.url("outbox_redrive", at=at),
                outbox_url=self.url("outbox"),
            )
        delivery_id = letter.entry.delivery_id
        if request.POST.get("delivery_id") != delivery_id or not outbox.redrive(delivery_id):
            messages.warning(request, "That dead letter changed meanwhile. Nothing was changed.")
            return self._to_outbox()
        attempts, error = letter.entry.attempts, letter.entry.last_error[:200]
        text = (
            f"Redrove outbox delivery {delivery_id} ({row['event_type']}, "
            f"{attempts} attempt{'s' if attempts != 1 else ''}"
            f"{', last error: ' + error if error else ''})"
        )
        self.history(request, row["machine"], letter.entry.key, CHANGE, text)
        messages.success(request, f"{text}: back in the outbox for delivery.")
        return self._to_outbox()

    @store_guard
    def outbox_redrive_all_view(self, request: HttpRequest) -> HttpResponse:
        """``outbox/redrive-all/``: confirm (GET), then redrive (POST) every
        dead letter."""
        require(request, PERM_VIEW, PERM_REDRIVE)
        outbox = get_outbox()
        if request.method != "POST":
            return self.render(
                request,
                "outbox_redrive_all_confirm.html",
                "Redrive every dead letter?",
                crumb="Redrive all",
                crumb_parent=("Outbox", self.url("outbox")),
                dead=outbox.stats()["dead"],
                action_url=self.url("outbox_redrive_all"),
                outbox_url=self.url("outbox"),
            )
        moved = outbox.redrive_all()
        if not moved:
            messages.info(request, "There were no dead letters to redrive. Nothing was changed.")
            return self._to_outbox()
        text = f"Redrove all outbox dead letters: {moved} back in the outbox"
        self.record(request, OUTBOX_OBJECT_ID, "XSM outbox", CHANGE, text)
        messages.success(request, f"{text}.")
        return self._to_outbox()
