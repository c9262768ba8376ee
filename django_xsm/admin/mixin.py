"""``StatechartAdminMixin``: your own models' statecharts in their ModelAdmin.

For every ``StatechartField`` of the model: the state column and its
:class:`~.filters.StatechartStateFilter`, a panel on the change page whose
buttons open ``<object_id>/statechart/<field>/send/?event=E`` (a preview,
then a CSRF-checked POST sent as the admin user with ``reason="admin"``;
it needs the change permission and what the machine's ``PERMISSIONS``
asks, about the row), and a changelist action per field and event
(:mod:`.bulk`). What each page shows: docs/admin.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.apps import apps
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.text import capfirst

from django_xsm import backend
from django_xsm.exceptions import (
    ConflictError,
    EventNotAcceptedError,
    LockTimeoutError,
    StoreUnavailableError,
    XsmError,
)
from django_xsm.fields import BoundStatechart, StatechartField
from django_xsm.fields.events import may_send
from django_xsm.middleware import get_request_info
from django_xsm.registry import MachineEntry, machines

from . import bulk
from .actions import PayloadForm, preview_effect
from .diagram import render_svg, short_id
from .filters import StatechartStateFilter
from .pages import deadline_rows, log_page
from .support import TEMPLATES, actor_of, display_json, display_value, logger, page_context

__all__ = ["StatechartAdminMixin"]
#: The transition log's ``reason`` for an event sent from a change page.
REASON = "admin"
UNAVAILABLE = "The XSM state store is unavailable right now; try again shortly."

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic for the type checker only
    _ModelAdmin = object


class StatechartAdminMixin(_ModelAdmin):
    """Statechart columns, filters, change-page panels and event buttons
    for a ``ModelAdmin`` (see the module docstring). Put it before
    ``admin.ModelAdmin`` in the bases."""

    change_form_template = TEMPLATES + "statechart_change_form.html"

    # --- the changelist ----------------------------------------------------------------

    def statechart_fields(self) -> list[StatechartField]:
        """The model's ``StatechartField`` s, in field order."""
        return [f for f in self.opts.fields if isinstance(f, StatechartField)]

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = list(super().get_list_display(request))
        missing = [f.name for f in self.statechart_fields() if f.name not in shown]
        return [*shown, *missing]

    def get_list_filter(self, request: HttpRequest) -> Any:
        names = {f.name for f in self.statechart_fields()}
        filters: list[Any] = []
        for item in super().get_list_filter(request):
            # A plain "status" would list the column's distinct values;
            # the state filter lists the chart's states instead.
            plain = isinstance(item, str) and item in names  # ("field", Filter) items stay
            filters.append((item, StatechartStateFilter) if plain else item)
        named = {
            item[0] if isinstance(item, (list, tuple)) else item
            for item in filters
            if isinstance(item, (str, list, tuple))  # a SimpleListFilter class names none
        }
        filters += [(name, StatechartStateFilter) for name in sorted(names - named, key=str)]
        return filters

    # --- bulk sends (changelist actions) --------------------------------------------------

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        """The ModelAdmin's actions and, for a user who may change rows, a
        bulk send per statechart field and event they may send, on the
        changelist. ``action_location``: Django 6.1's (ActionLocation; its
        change form's actions get no bulk send), None on older Django."""
        actions: dict[str, Any]
        if action_location is None:
            actions = super().get_actions(request)
        else:
            actions = super().get_actions(request, action_location=action_location)  # type: ignore[call-arg]
            if getattr(action_location, "value", "CHANGE_LIST") != "CHANGE_LIST":
                return actions
        if not self.has_change_permission(request) or "_popup" in request.GET:
            return actions
        fields = self.statechart_fields()
        plural = self.opts.verbose_name_plural
        for field in fields:
            entry = machines.get(field.machine_name)
            if entry is None:
                continue
            suffix = f" ({field.verbose_name})" if len(fields) > 1 else ""
            for event in bulk.offered_events([entry], request.user):
                name = f"xsm_send:{field.name}:{event}"
                described = f"Send {event} to the selected {plural}{suffix}"
                actions[name] = (_bulk_action(field.name, event), name, described)
        return actions

    def statechart_bulk_send(
        self, request: HttpRequest, queryset: models.QuerySet[Any], field_name: str, event: str
    ) -> HttpResponse | None:
        """The bulk send action: the preview, then (POST ``step=apply``) the
        sends and their results; None (back to the changelist) with an
        error message past ``BULK_MAX`` or when the store is down."""
        field = next(f for f in self.statechart_fields() if f.name == field_name)
        entry = machines[field.machine_name]
        noun = str(self.opts.verbose_name_plural)
        problem = bulk.too_many(queryset.count(), noun)
        if problem:
            self.message_user(request, problem, messages.ERROR)
            return None
        posted = list(dict.fromkeys(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)))
        rows = [self._bulk_row(request, obj, field, entry) for obj in queryset]
        found = {str(r.target.pk) for r in rows}
        if request.POST.get("select_across") not in ("1", "True"):
            # checked, then deleted (or filtered away) before this request
            rows += [
                bulk.BulkRow(label=pk, url="", entry=entry, key="", target=None,
                             problem=f"No {self.opts.verbose_name} with ID “{pk}” exists now.")
                for pk in posted if pk not in found
            ]  # fmt: skip
        title = f"Send {event} to {len(rows)} {noun}"
        step = "apply" if request.POST.get("step") == "apply" else "preview"
        token = request.POST.get("token", "") if step == "apply" else bulk.new_token()
        context = {
            **page_context(self, request, title, self._crumbs(None, "Bulk send")),
            "rows": rows,
            "event": event,
            "noun": noun,
            "token": token,
            "action_url": request.get_full_path(),
            "cancel_url": request.get_full_path(),
            "hidden": [
                ("action", f"xsm_send:{field_name}:{event}"),
                *((helpers.ACTION_CHECKBOX_NAME, str(r.target.pk)) for r in rows if r.target),
            ],
        }
        try:
            if step == "apply":
                if not bulk.valid_token(token):
                    self.message_user(request, "The confirmation is incomplete.", messages.ERROR)
                    return None
                if not bulk.send_all(rows, event, token, request=request):
                    self.message_user(request, bulk.UNAVAILABLE, messages.ERROR)
                for row in rows:
                    if row.outcome == bulk.SENT:
                        self.log_change(request, row.target, bulk.change_text(event, row, token))
                step = "results"
            else:
                bulk.preview(rows, event, request.user)
        except StoreUnavailableError:
            self.message_user(request, bulk.UNAVAILABLE, messages.ERROR)
            return None
        context.update(step=step, **bulk.summary(rows))
        return TemplateResponse(request, TEMPLATES + "bulk_send.html", context)

    def _bulk_row(
        self, request: HttpRequest, obj: models.Model, field: StatechartField, entry: MachineEntry
    ) -> bulk.BulkRow:
        bound: BoundStatechart = getattr(obj, field.name)
        allowed = self.has_change_permission(request, obj)
        return bulk.BulkRow(
            label=str(obj),
            url=self.statechart_url("change", obj),
            entry=entry,
            key=bound.key,
            target=obj,
            send=bound.send,
            creates=True,
            denied="" if allowed else f"You may not change this {self.opts.verbose_name}.",
        )

    # --- the change page ---------------------------------------------------------------

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        if obj is not None and obj.pk is not None and not add:
            context["xsm_panels"] = [
                self.statechart_panel(request, obj, f) for f in self.statechart_fields()
            ]
        return super().render_change_form(request, context, add, change, form_url, obj)

    def statechart_panel(
        self, request: HttpRequest, obj: models.Model, field: StatechartField
    ) -> dict[str, Any]:
        """What the change page shows of ``obj``'s statechart in ``field``."""
        bound: BoundStatechart = getattr(obj, field.name)
        panel: dict[str, Any] = {
            "name": field.name,
            "label": capfirst(field.verbose_name),
            "machine": field.machine_name,
            "column": bound.column,
        }
        entry = machines.get(field.machine_name)
        if entry is None:
            return {**panel, "problem": f"Machine {field.machine_name!r} is not registered."}
        try:
            panel["key"] = key = bound.key
            view = bound.view()
            state_ids = bound.state_ids
            can_change = self.has_change_permission(request, obj)
            events = bound.events(user=request.user) if can_change else []
            send_url = self.statechart_url("send", obj, field.name)
            deadlines = deadline_rows(entry.machine, view)[0] if view is not None else []
            log = log_page(entry, key, request.GET.get(f"{field.name}_after_seq", ""))
            panel.update(
                state=display_value(bound.value),
                state_ids=[short_id(entry.machine, s) for s in state_ids if s != entry.machine.id],
                version=bound.version,
                status=view.status if view is not None else "not started",
                updated=view.updated_at if view is not None else None,
                diagram=render_svg(entry.machine, state_ids, log["records"]),
                context_json=display_json(bound.context),
                deadlines=deadlines,
                can_change=can_change,
                events=[
                    {
                        "type": str(e),
                        "conditional": e.conditional,
                        "url": f"{send_url}?{urlencode({'event': e})}",
                    }
                    for e in events
                ],
                log=log["rows"],
                log_links=self._log_links(request, field.name, log),
            )
        except StoreUnavailableError:
            panel["problem"] = UNAVAILABLE
        except XsmError as exc:
            logger.warning("The admin cannot read instance %r: %s", panel.get("key", ""), exc)
            panel["problem"] = f"The statechart cannot be read: {exc}"
        return panel

    def _log_links(
        self, request: HttpRequest, name: str, log: dict[str, Any]
    ) -> list[tuple[str, str]]:
        param = f"{name}_after_seq"
        links = []
        for label, after in (("« Older", log["older"]), ("Newer »", log["newer"])):
            if after is not None:
                query = request.GET.copy()
                query[param] = after
                links.append((label, f"?{query.urlencode()}#xsm-{name}"))
        if log["latest"] is not None:
            query = request.GET.copy()
            query.pop(param, None)
            links.append(("Latest", f"?{query.urlencode()}#xsm-{name}"))
        return links

    # --- sending -----------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/statechart/<str:field>/send/",
                self.admin_site.admin_view(self.statechart_send_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_statechart_send",
            ),
            *super().get_urls(),
        ]

    def statechart_url(self, page: str, obj: models.Model, field: str = "") -> str:
        """The URL of ``obj``'s change page (``"change"``) or of the send
        page of its ``field`` (``"send"``)."""
        opts = self.opts
        name = f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}"
        if page == "change":
            return reverse(f"{name}_change", args=(quote(obj.pk),))
        return reverse(f"{name}_statechart_{page}", args=(quote(obj.pk), field))

    def statechart_send_view(
        self, request: HttpRequest, object_id: str, field: str
    ) -> HttpResponse:
        """Preview an event (GET, or POST ``step=preview``), then send it
        (POST ``step=apply``); see the module docstring."""
        chart_field = next((f for f in self.statechart_fields() if f.name == field), None)
        entry = machines.get(chart_field.machine_name) if chart_field is not None else None
        if chart_field is None or entry is None:
            raise Http404(f"{self.opts.verbose_name} has no statechart field {field!r}")
        obj = self.get_object(request, unquote(object_id))
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        if obj is None:  # as the admin's own change view answers
            messages.warning(
                request,
                f"{capfirst(self.opts.verbose_name)} with ID “{object_id}” does not exist. "
                "Perhaps it was deleted?",
            )
            return HttpResponseRedirect(reverse(f"{self.admin_site.name}:index"))
        event = request.GET.get("event", "")
        try:
            entry.machine.check_sendable(event)
        except XsmError as exc:  # reserved, unknown or empty: no button leads here
            raise Http404(exc.message) from None
        if not may_send(entry, event, request.user, obj):
            raise PermissionDenied
        target = _Target(
            obj, chart_field, entry, getattr(obj, field), event,
            f"{self.statechart_url('change', obj)}#xsm-{field}",
        )  # fmt: skip
        form = PayloadForm(request.POST if request.method == "POST" else None)
        try:
            if request.method == "POST" and form.is_valid() and request.POST.get("step") == "apply":
                return self._send(request, target, form)
            return self._preview(request, target, form)
        except StoreUnavailableError:
            messages.error(request, UNAVAILABLE)
            return HttpResponseRedirect(target.back)

    def _preview(
        self, request: HttpRequest, target: _Target, form: PayloadForm, *, status: int = 200
    ) -> HttpResponse:
        entry, event = target.entry, target.event
        key = target.bound.key
        record = backend.get_store().load(key)
        if record is not None and not entry.objects.owns(record):
            messages.error(request, f"{key} belongs to another machine; nothing can be sent.")
            return HttpResponseRedirect(target.back)
        snapshot: Mapping[str, Any]
        if record is None:  # no event yet: sending starts the instance first
            snapshot = entry.machine.initial_snapshot(now=time.time_ns() // 1_000_000).snapshot
        else:
            snapshot = record.snapshot
        effect: dict[str, Any] = {}
        error = ""
        if form.is_bound and not form.is_valid():
            status = 400
        else:
            payload = form.cleaned_data["payload"] if form.is_bound else {}
            try:
                effect = preview_effect(entry.machine, snapshot, event, payload)
            except Exception as exc:  # a guard that needs a payload field, an invalid event
                error = (
                    f"{event} cannot be evaluated with this payload: {type(exc).__name__}: {exc}"
                )
                status = 400 if form.is_bound else status
            if not form.is_bound and (error or not effect["accepted"]):
                # The page opens with the empty payload previewed: shown when
                # it is accepted (an event that needs no data); a refusal or
                # an error waits for the user's own payload and preview.
                effect, error = {}, ""
        obj = target.obj
        send_url = self.statechart_url("send", obj, target.field.name)
        here = f"Send {event}"
        context = {
            **page_context(self, request, f"{here} to {obj}", self._crumbs(obj, here)),
            "original": obj,
            "field_label": capfirst(target.field.verbose_name),
            "key": key,
            "version": record.version if record is not None else 0,
            "reason": REASON,
            "form": form,
            "error": error,
            "previewed": bool(effect),
            "change_url": target.back,
            "action_url": f"{send_url}?{urlencode({'event': event})}",
            **effect,
            "event": event,
        }
        return TemplateResponse(request, TEMPLATES + "statechart_send.html", context, status=status)

    def _crumbs(self, obj: models.Model | None, here: str) -> list[tuple[str, str]]:
        """(label, href) from the admin index to the send page ('' = here);
        without ``obj``, from the changelist (a bulk send)."""
        opts, site = self.opts, self.admin_site.name
        found = [
            ("Home", reverse(f"{site}:index")),
            (
                str(apps.get_app_config(opts.app_label).verbose_name),
                reverse(f"{site}:app_list", kwargs={"app_label": opts.app_label}),
            ),
            (
                str(capfirst(opts.verbose_name_plural)),
                reverse(f"{site}:{opts.app_label}_{opts.model_name}_changelist"),
            ),
        ]
        if obj is not None:
            found.append((str(obj), self.statechart_url("change", obj)))
        return [*found, (here, "")]

    def _send(self, request: HttpRequest, target: _Target, form: PayloadForm) -> HttpResponse:
        bound, event, name = target.bound, target.event, target.field.name
        before = display_value(bound.value)
        if request.POST.get("version", "") != str(bound.version):
            # The preview was of another state: show the new one instead.
            messages.warning(
                request,
                f"{name} changed since the preview; nothing was sent. "
                "Review the new preview and send again.",
            )
            return self._preview(request, target, form, status=409)
        try:
            # The event as one dict: payload keys never reach send()'s own
            # options (actor, lock, idempotency_key, ...).
            receipt = bound.send(
                {**form.cleaned_data["payload"], "type": event},
                actor=actor_of(request),
                reason=REASON,
                correlation_id=get_request_info(request).correlation_id,
                strict=True,  # a refusal says why, as the API does
            )
        except StoreUnavailableError:
            raise
        except (ConflictError, LockTimeoutError):
            messages.error(request, f"{target.obj} is busy (locked or changing); nothing was sent.")
            return HttpResponseRedirect(target.back)
        except EventNotAcceptedError as exc:
            messages.error(request, f"Refused: {exc.message}. Nothing changed.")
            return HttpResponseRedirect(target.back)
        except Exception as exc:  # an action raised: the block rolled back
            logger.exception("admin send of %s to %s.%s failed", event, target.obj, name)
            messages.error(request, f"{event} failed and nothing was saved: {exc!r}")
            return HttpResponseRedirect(target.back)
        text = f"Sent {event} to {name}: {before} → {display_value(receipt.value)}"
        self.log_change(request, target.obj, text)
        messages.success(request, f"{text}.")
        return HttpResponseRedirect(target.back)


def _bulk_action(field: str, event: str) -> Any:
    """The changelist action sending ``event`` to the selected rows' ``field``."""

    def action(
        modeladmin: StatechartAdminMixin, request: HttpRequest, queryset: models.QuerySet[Any]
    ) -> HttpResponse | None:
        return modeladmin.statechart_bulk_send(request, queryset, field, event)

    return action


@dataclass(frozen=True, slots=True)
class _Target:
    """What a send page is about: the row, its field, the machine, the
    bound statechart, the event and the change page to go back to."""

    obj: models.Model
    field: StatechartField
    entry: MachineEntry
    bound: BoundStatechart
    event: str
    back: str
