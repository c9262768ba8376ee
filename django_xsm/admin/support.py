"""What the admin pages share: permission checks, the store-outage page,
rendering, redaction for display and the admin history (``LogEntry``).

The admin reads instances through the registry's managers and writes
through ``InstanceManager.open()`` / ``get_scanner()`` with the admin user
as actor, so everything an operator does lands in the transition log like
any other event. Display data is passed through
:func:`django_xsm.operations.redacted` (the one redaction function with
the ``AUDIT['REDACT']`` fragments)
and escaped by the templates.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

import django
from django.contrib.admin import AdminSite
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from django_xsm.exceptions import (
    InvalidConfigError,
    SnapshotCorruptError,
    StoreUnavailableError,
    UnknownMachineError,
    XsmError,
)
from django_xsm.managers import InstanceView
from django_xsm.models import Instance
from django_xsm.operations import redacted
from django_xsm.persistence.arguments import validate_key
from django_xsm.persistence.records import ms_to_datetime
from django_xsm.registry import InstanceDoesNotExist, MachineEntry, machines

__all__ = [
    "OUTBOX_OBJECT_ID",
    "PageAnswer",
    "PageMixin",
    "display_json",
    "display_value",
    "ms_datetime",
    "query_int",
    "require",
    "store_guard",
]

logger = logging.getLogger("django_xsm.admin")

TEMPLATES = "admin/django_xsm/"
#: The admin history's object id of actions on the whole outbox (it has no
#: colon, so it is no instance's ``<machine>:<key>``).
OUTBOX_OBJECT_ID = "outbox"


class PageAnswer(Exception):
    """Raised by a page helper to answer with ``response`` instead of the
    page (:func:`store_guard` returns it)."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def require(request: HttpRequest, *perms: str) -> None:
    """403 unless the user holds every permission (``admin_view`` only
    checks ``is_staff``)."""
    if not all(request.user.has_perm(p) for p in perms):
        raise PermissionDenied


def store_guard(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Answer a store outage with a plain 503 page (``Retry-After``), an
    unknown machine with 404 and a machine that failed to load with a plain
    500 page; never a traceback."""

    @functools.wraps(view)
    def guarded(self: PageMixin, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(self, request, *args, **kwargs)
        except PageAnswer as answer:
            return answer.response
        except StoreUnavailableError as exc:
            response = self.render(
                request,
                "unavailable.html",
                "XSM store unavailable",
                status=503,
                retry_after=exc.retry_after_s,
            )
            response["Retry-After"] = str(max(1, int(exc.retry_after_s)))
            return response
        except SnapshotCorruptError as exc:
            # a damaged record met outside the instance page (a list row, an
            # action): say which, plainly, instead of a traceback
            return self.unreadable(request, exc.key or request.GET.get("key", ""), exc)
        except UnknownMachineError:
            raise Http404("No such machine") from None
        except ImproperlyConfigured as exc:
            return self.render(
                request, "unavailable.html", "XSM misconfigured", status=500, problem=str(exc)
            )

    return guarded


def query_int(value: str | None, default: int, low: int, high: int) -> int:
    """A number from the query string, between ``low`` and ``high``;
    ``default`` when it is missing or not a number."""
    try:
        number = int(value) if value is not None else default
    except ValueError:  # not a number, or more digits than int() takes
        return default
    return min(max(number, low), high)


def ms_datetime(ms: int | None) -> _dt.datetime | None:
    return None if ms is None else ms_to_datetime(int(ms))


def display_value(value: Any) -> str:
    """A state value as leaf paths: ``"paid"``, ``"b.r1.x, b.r2.u"``."""

    def leaves(v: Any, head: str) -> list[str]:
        if isinstance(v, Mapping):
            if not v:
                return [head.rstrip(".")]
            return [p for k, sub in v.items() for p in leaves(sub, f"{head}{k}.")]
        return [f"{head}{v}"]

    return ", ".join(leaves(value, "")) if value is not None else "—"


def display_json(value: Any) -> str:
    """Redacted, pretty JSON text (escaped later by the template)."""
    return json.dumps(redacted(value), indent=2, ensure_ascii=False, default=str)


def page_context(model_admin: Any, request: HttpRequest, title: str, crumbs: Any) -> dict[str, Any]:
    """What every XSM admin page's template gets, whichever admin draws it."""
    opts = model_admin.opts
    return {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "opts": opts,
        "app_label": opts.app_label,
        "xsm_crumbs": crumbs,
        "xsm_crumbs_ol": django.VERSION >= (6, 0),
    }


class PageMixin:
    """Rendering and URL helpers of :class:`django_xsm.admin.InstanceAdmin`."""

    admin_site: AdminSite
    model: type[Instance]

    def url(self, name: str, machine: str | None = None, **query: Any) -> str:
        args = (machine,) if machine is not None else ()
        path = reverse(f"{self.admin_site.name}:django_xsm_{name}", args=args)
        params = {k: v for k, v in query.items() if v not in (None, "")}
        return f"{path}?{urlencode(params)}" if params else path

    def render(
        self,
        request: HttpRequest,
        template: str,
        title: str,
        *,
        status: int = 200,
        **context: Any,
    ) -> TemplateResponse:
        crumbs = self.crumbs(
            context.get("machine"),
            context.get("key", ""),
            context.get("crumb", ""),
            context.get("crumb_parent"),
        )
        data = {
            **page_context(self, request, title, crumbs),
            "index_url": self.url("instance_changelist"),
            **context,
        }
        response = TemplateResponse(request, TEMPLATES + template, data, status=status)
        response.render()
        return response

    def crumbs(
        self,
        machine: MachineEntry | None,
        key: str,
        here: str = "",
        parent: tuple[str, str] | None = None,
    ) -> list[tuple[str, str]]:
        """(label, href) from the admin index to this page ('' = current);
        ``parent`` is a page between the instance and this one."""
        site = self.admin_site.name
        found = [
            ("Home", reverse(f"{site}:index")),
            ("XSM", reverse(f"{site}:app_list", kwargs={"app_label": "django_xsm"})),
            ("Instances", self.url("instance_changelist")),
        ]
        if machine is not None:
            found.append((machine.name, self.url("machine", machine.name)))
        if key and machine is not None:
            found.append((key, self.url("detail", machine.name, key=key)))
        if parent is not None:
            found.append(parent)
        if here:
            found.append((here, ""))
        found[-1] = (found[-1][0], "")  # the current page: no link
        return found

    def missing(self, request: HttpRequest, entry: MachineEntry, key: str) -> HttpResponse:
        """The 404 page of an instance that is not stored."""
        return self.render(
            request, "missing.html", "No such instance", status=404, key=key, machine=entry
        )

    def unreadable(
        self, request: HttpRequest, key: str, error: XsmError, parked: str = ""
    ) -> HttpResponse:
        """The page of an instance whose stored record cannot be read;
        ``parked`` is why the timer scanner parked it ('' = it did not).

        A known condition of the data (damaged, or encrypted with a key this
        process lacks), not a fault of the page: status 200 and a WARNING
        without traceback, as the model change page's panel does."""
        logger.warning("The admin cannot read instance %r: %s", key, error)
        return self.render(
            request,
            "missing.html",
            "Unreadable instance",
            key=key,
            error=error,
            parked=parked,
        )

    def target(self, request: HttpRequest, machine: str) -> tuple[MachineEntry, str]:
        """The machine and the ``?key=`` an instance page is about; answers
        with the 400 page (:class:`PageAnswer`) for a key that cannot be an
        instance key."""
        entry = machines[machine]  # 404 through store_guard when unknown
        key = request.GET.get("key", "")
        invalid = self.bad_key(request, key, entry)
        if invalid is not None:
            raise PageAnswer(invalid)
        return entry, key

    def stored(self, request: HttpRequest, machine: str) -> tuple[MachineEntry, str, InstanceView]:
        """:meth:`target` and the stored instance; answers with the 400 or
        404 page (:class:`PageAnswer`)."""
        entry, key = self.target(request, machine)
        try:
            return entry, key, entry.objects.get(key)
        except InstanceDoesNotExist:
            raise PageAnswer(self.missing(request, entry, key)) from None

    def bad_key(
        self, request: HttpRequest, key: str, machine: MachineEntry | None = None
    ) -> HttpResponse | None:
        """A plain 400 page when ``key`` cannot be an instance key (empty,
        too long, control characters), else None."""
        try:
            validate_key(key)
        except InvalidConfigError as exc:
            return self.render(
                request,
                "missing.html",
                "Invalid key",
                status=400,
                key=key,
                machine=machine,
                invalid=exc.message,
            )
        return None

    def history(self, request: HttpRequest, machine: str, key: str, flag: int, text: str) -> None:
        """Record an admin action on an instance in Django's admin history
        (``LogEntry``): it outlives the instance, unlike the transition log."""
        self.record(request, f"{machine}:{key}", f"{machine} {key}", flag, text)

    def record(
        self, request: HttpRequest, object_id: str, object_repr: str, flag: int, text: str
    ) -> None:
        """A ``LogEntry`` by the request's user about ``object_id`` (an
        instance's ``<machine>:<key>``, or ``outbox``)."""
        user_id = request.user.pk
        assert user_id is not None  # admin_view lets only staff users in
        LogEntry.objects.create(
            user_id=user_id,
            content_type=ContentType.objects.get_for_model(self.model, for_concrete_model=False),
            object_id=object_id,
            object_repr=object_repr[:200],
            action_flag=flag,
            change_message=text,
        )


def actor_of(request: HttpRequest) -> str:
    """The admin user as the transition log's actor (their username)."""
    user = request.user
    name = user.get_username() if hasattr(user, "get_username") else ""
    return str(name or f"user:{user.pk}")
