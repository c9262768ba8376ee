"""The admin's write actions: send an event, fire timers now, forget.

Each needs ``view_instance`` plus its own permission, runs only on POST
(CSRF-protected by ``admin_view``), acts as the admin user (the transition
log's ``actor`` is their username) and is also recorded in Django's admin
history (``LogEntry``), which is the only trace a forgotten instance keeps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin.models import CHANGE, DELETION
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect

from django_xsm import backend, conf, operations
from django_xsm.engine import Machine
from django_xsm.engine.run.context import copy_data
from django_xsm.exceptions import (
    ConflictError,
    DataTooDeepError,
    EventNotAcceptedError,
    LockTimeoutError,
    ReservedEventError,
    StoreUnavailableError,
    UnknownEventError,
    UnstorableValueError,
)
from django_xsm.fields.events import may_send
from django_xsm.middleware import get_request_info
from django_xsm.models import PERM_FIRE, PERM_FORGET, PERM_SEND, PERM_VIEW
from django_xsm.persistence.payloads import payload_size
from django_xsm.persistence.records import StoredRecord
from django_xsm.registry import InstanceDoesNotExist, MachineEntry, machines

from .diagram import describe_transition
from .support import (
    PageMixin,
    actor_of,
    display_json,
    display_value,
    logger,
    ms_datetime,
    require,
    store_guard,
)

__all__ = [
    "MAX_PAYLOAD_CHARS",
    "ActionViews",
    "PayloadForm",
    "SendEventForm",
    "parse_payload",
    "preview_effect",
    "refusal",
]

MAX_PAYLOAD_CHARS = 64 * 1024
DEFAULT_REASON = "sent from the admin"


def parse_payload(text: str) -> dict[str, Any]:
    """An event payload typed in a form: a JSON object without ``type``
    (``""`` is ``{}``); :class:`~django.forms.ValidationError` otherwise.
    Callers cap the text at :data:`MAX_PAYLOAD_CHARS` first."""
    text = text.strip() or "{}"
    try:
        data = json.loads(text)
        # The engine's depth limit (MAX_DATA_DEPTH) on every Python: 3.13's
        # parser reads a 5000-deep payload that 3.11 and 3.12 refuse.
        copy_data(data)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc.msg} (line {exc.lineno}).") from None
    except (RecursionError, DataTooDeepError):  # "[[[[...", deeper than the parser or the limit
        raise forms.ValidationError("The payload is nested too deeply.") from None
    if not isinstance(data, dict):
        raise forms.ValidationError("The payload must be a JSON object ({...}).")
    if "type" in data:
        raise forms.ValidationError(
            "The payload may not hold 'type': the event type is given on its own."
        )
    # what every send path refuses (the block checks it again, at send)
    try:
        size = payload_size(data)
    except UnstorableValueError as exc:  # a lone surrogate such as "\ud800"
        raise forms.ValidationError(f"The payload cannot be stored: {exc.message}.") from None
    limit = conf.get_settings().max_payload_bytes
    if size > limit:
        raise forms.ValidationError(
            f"The payload is {size} bytes of JSON, over the limit of {limit} bytes "
            "(XSM['MAX_PAYLOAD_BYTES'])."
        )
    return data


def refusal(machine: Machine, snapshot: Mapping[str, Any], event: str) -> str:
    """Why ``event`` is not accepted in ``snapshot``, in the API's words
    (``EventNotAcceptedError``'s message: no transition for it, or which
    guards said no). Reads the chart only: no guard runs."""
    reason, guards = machine.restore(snapshot).refusal(event)
    value = snapshot.get("value")
    return EventNotAcceptedError(event, value=value, reason=reason, guards=guards).message


def preview_effect(
    machine: Machine, snapshot: Mapping[str, Any], event: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """What sending ``event`` with ``payload`` to ``snapshot`` would do, for
    the confirmation pages (``admin/django_xsm/_effect.html``): computed
    with the pure ``machine.transition()``, so nothing runs and nothing is
    written; ``refusal`` says why when it is not accepted. Raises whatever
    evaluating the event raises (a guard that needs a payload field, an
    invalid event)."""
    now_ms = time.time_ns() // 1_000_000
    result = machine.transition(snapshot, {**payload, "type": event}, now=now_ms)
    after = result.snapshot
    return {
        "event": event,
        "accepted": result.accepted,
        "refusal": "" if result.accepted else refusal(machine, snapshot, event),
        "changed": result.changed,
        "before": display_value(snapshot.get("value")),
        "after": display_value(after.get("value")),
        "status_after": after.get("status", ""),
        "transitions": [describe_transition(machine, t) for t in result.transitions],
        "actions": [
            {"type": a.type, "params": display_json(dict(a.params)) if a.params else ""}
            for a in result.actions
        ],
        "deadlines": [
            {"event": d.get("event_type"), "due": ms_datetime(d.get("due_ms"))}
            for d in after.get("deadlines", ())
        ],
        "payload_json": json.dumps(payload, ensure_ascii=False),
        "payload_display": display_json(payload),
    }


class PayloadForm(forms.Form):
    """An event's data as a JSON object of at most :data:`MAX_PAYLOAD_CHARS`
    characters: the model admin's send page, and part of :class:`SendEventForm`."""

    payload = forms.CharField(
        required=False,
        initial="{}",
        max_length=MAX_PAYLOAD_CHARS,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 60, "spellcheck": "false"}),
        help_text="A JSON object: the event's data (without 'type').",
    )

    def clean_payload(self) -> dict[str, Any]:
        return parse_payload(self.cleaned_data["payload"])


class SendEventForm(PayloadForm):
    """The XSM browser's send form: an event type, its data and a reason."""

    field_order = ["event", "payload", "reason"]

    event = forms.CharField(
        max_length=255,
        help_text="Event type, e.g. PAY.",
        widget=forms.TextInput(attrs={"list": "xsm-events", "autocomplete": "off"}),
    )
    reason = forms.CharField(
        required=False, max_length=200, help_text="Shown in the transition log."
    )

    def __init__(self, *args: Any, machine: Machine, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.machine = machine

    def clean_event(self) -> str:
        event = str(self.cleaned_data["event"]).strip()
        if not event or not event.isprintable():
            raise forms.ValidationError("Give an event type of printable characters.")
        try:
            self.machine.check_sendable(event)
        except ReservedEventError as exc:
            text = f"{exc.message}."
            if exc.namespace == "xstate":
                text += " To fire a due timer, use “Fire timers now”."
            raise forms.ValidationError(text) from None
        except UnknownEventError as exc:
            raise forms.ValidationError(exc.message) from None
        return event

    def clean_reason(self) -> str:
        reason = str(self.cleaned_data["reason"]).strip()
        if reason and not reason.isprintable():
            raise forms.ValidationError("Use printable characters only.")
        return reason


class ActionViews(PageMixin):
    """Send, fire and forget."""

    def _back(self, entry: MachineEntry, key: str) -> HttpResponse:
        return HttpResponseRedirect(self.url("detail", entry.name, key=key))

    def _finished(self, request: HttpRequest, entry: MachineEntry, key: str) -> HttpResponse:
        """Back to the instance page with an error message: a finished
        instance accepts no event and arms no timer, so there is nothing to
        preview, send or fire (and nothing is recorded)."""
        messages.error(
            request,
            f"The instance {key} is finished (status done): it accepts no more events and has no "
            "timers to fire. Nothing was changed.",
        )
        return self._back(entry, key)

    # --- send -------------------------------------------------------------------

    @store_guard
    def send_view(self, request: HttpRequest, machine: str) -> HttpResponse:
        require(request, PERM_VIEW, PERM_SEND)
        entry, key = self.target(request, machine)
        record = backend.get_store().load(key)
        if record is None or not entry.objects.owns(record):
            return self.missing(request, entry, key)
        if record.snapshot.get("status") == "done":
            return self._finished(request, entry, key)
        page: dict[str, Any] = {
            "machine": entry,
            "key": key,
            "detail_url": self.url("detail", machine, key=key),
            "action_url": self.url("send", machine, key=key),
            "events": [
                e for e in entry.machine.event_types if may_send(entry, e, request.user, key)
            ],
            "crumb": "Send an event",
        }
        if request.method != "POST":
            form = SendEventForm(
                initial={"event": request.GET.get("event", "")}, machine=entry.machine
            )
            return self._form(request, form, page)
        form = SendEventForm(request.POST, machine=entry.machine)
        if not form.is_valid():
            return self._form(request, form, page, status=400)
        event = form.cleaned_data["event"]
        if not may_send(entry, event, request.user, key):
            error = f"You may not send {event} to {key} (the machine's PERMISSIONS)."
            return self._form(request, form, page, error, 403)
        if request.POST.get("step") != "apply":
            return self._preview(request, entry, record, form, page)
        return self._apply(request, entry, key, form, page, request.POST.get("version", ""))

    def _form(
        self,
        request: HttpRequest,
        form: SendEventForm,
        page: dict[str, Any],
        error: str = "",
        status: int = 200,
    ) -> HttpResponse:
        """The send form (again), with ``error`` and answered with ``status``."""
        title = f"Send an event to {page['key']}"
        return self.render(
            request, "send.html", title, form=form, error=error, status=status, **page
        )

    def _preview(
        self,
        request: HttpRequest,
        entry: MachineEntry,
        record: StoredRecord,
        form: SendEventForm,
        page: dict[str, Any],
    ) -> HttpResponse:
        """The event's effect from the pure ``machine.transition()``; nothing
        runs and nothing is written."""
        event, payload = form.cleaned_data["event"], form.cleaned_data["payload"]
        try:
            effect = preview_effect(entry.machine, record.snapshot, event, payload)
        except Exception as exc:  # a guard raising on this payload, an invalid event...
            error = f"The event cannot be evaluated: {type(exc).__name__}: {exc}"
            return self._form(request, form, page, error, 400)
        return self.render(
            request,
            "send_confirm.html",
            f"Confirm {event} on {page['key']}",
            form=form,
            reason=form.cleaned_data["reason"],
            version=record.version,
            **effect,
            **page,
        )

    def _apply(
        self,
        request: HttpRequest,
        entry: MachineEntry,
        key: str,
        form: SendEventForm,
        page: dict[str, Any],
        version: str,
    ) -> HttpResponse:
        event, payload = form.cleaned_data["event"], form.cleaned_data["payload"]
        reason = form.cleaned_data["reason"] or DEFAULT_REASON

        def refuse(message: str, status: int) -> HttpResponse:
            return self._form(request, form, page, message, status)

        if not version.isdecimal() or len(version) > 19:  # what int() below takes
            return refuse("The confirmation is incomplete; preview the event again.", 400)
        receipt: Any = None
        try:
            with entry.objects.open(
                key,
                actor=actor_of(request),
                create=False,
                correlation_id=get_request_info(request).correlation_id,
            ) as block:
                if block.version == int(version):
                    before = display_value(block.value)
                    # strict: a refusal raises (the block writes nothing) and
                    # says why, as the API does
                    receipt = block.send({**payload, "type": event}, reason=reason, strict=True)
        except InstanceDoesNotExist:
            return self.missing(request, entry, key)
        except (ConflictError, LockTimeoutError):
            receipt = None
        except StoreUnavailableError:
            raise
        except EventNotAcceptedError as exc:
            return refuse(f"Refused: {exc.message}. Nothing changed.", 409)
        except Exception as exc:  # an action raised: the block rolled back
            logger.exception("admin send of %s to %r failed", event, key)
            return refuse(f"{event} failed and nothing was saved: {type(exc).__name__}: {exc}", 500)
        if receipt is None:
            return refuse(
                "The instance changed since the preview (or is locked); nothing was sent. "
                "Review the new state and preview again.",
                409,
            )
        after = display_value(receipt.value)
        text = f"Sent {event}: {before} → {after}"
        self.history(request, entry.name, key, CHANGE, text)
        messages.success(request, f"{text}.")
        return self._back(entry, key)

    # --- fire timers ------------------------------------------------------------------

    @store_guard
    def fire_view(self, request: HttpRequest, machine: str) -> HttpResponse:
        require(request, PERM_VIEW, PERM_FIRE)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        entry, key, view = self.stored(request, machine)
        if view.status == "done":
            return self._finished(request, entry, key)
        force = request.POST.get("force") in ("1", "on", "true")
        # The admin acts, not the background timer loop: the transition log
        # names the admin user (``actor=`` replaces the scanner's xsm:timer).
        result = backend.get_scanner(machines).fire(key, force=force, actor=actor_of(request))
        kind = "every armed timer" if force else "due timers"
        text = f"Fired {kind}: {result.fired} fired"
        if result.stale:
            text += ", nothing due" if not result.fired else f", {result.stale} stale"
        if result.errors:
            text += f", {result.errors} failed (see Deadlines)"
        if result.dead_lettered:
            text += f", {result.dead_lettered} dead-lettered"
        if result.locked:
            text += ", locked by another writer (try again)"
        self.history(request, entry.name, key, CHANGE, text)
        level = messages.WARNING if result.errors or result.locked else messages.SUCCESS
        messages.add_message(request, level, f"{text}.")
        return self._back(entry, key)

    # --- forget ----------------------------------------------------------------------

    @store_guard
    def forget_view(self, request: HttpRequest, machine: str) -> HttpResponse:
        require(request, PERM_VIEW, PERM_FORGET)
        entry, key, view = self.stored(request, machine)
        if request.method != "POST":
            return self.render(
                request,
                "forget_confirm.html",
                f"Forget {key}?",
                machine=entry,
                key=key,
                view=view,
                state=display_value(view.value),
                log_records=backend.get_log().last_seq(key),
                crumb="Forget",
                action_url=self.url("forget", machine, key=key),
                detail_url=self.url("detail", machine, key=key),
            )
        # The same erase as ``manage.py xsm_forget``: record, deadlines, lock,
        # transition log, then the key's idempotency rows.
        counts = operations.forget_instance(key)
        erased = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        text = (
            f"Forgot {key} (state {display_value(view.value)}, version {view.version}); "
            f"erased: {erased or 'nothing'}"
        )
        self.history(request, entry.name, key, DELETION, text)
        messages.success(request, f"{text}.")
        return HttpResponseRedirect(self.url("machine", machine))
