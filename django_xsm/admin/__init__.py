"""The "XSM" section of the Django admin: an audit browser over the store.

:class:`InstanceAdmin` (registered on ``admin.site`` by autodiscovery; for
another ``AdminSite``, ``site.register(Instance, InstanceAdmin)``) gathers
the read-only pages (:mod:`.pages`), the write actions (:mod:`.actions`,
:mod:`.bulk`) and the Outbox page (:mod:`.outbox`). For your own models'
``StatechartField`` s: :class:`StatechartAdminMixin` (:mod:`.mixin`) and
its state filter (:mod:`.filters`). The pages: docs/admin.md.

``admin_view`` only checks ``is_staff``; every page checks the permissions
of :mod:`django_xsm.models` itself and answers 403 without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from django_xsm.models import PERM_VIEW, Instance

from .actions import ActionViews
from .bulk import BulkViews
from .filters import StatechartStateFilter
from .mixin import StatechartAdminMixin
from .outbox import OutboxViews
from .pages import ReadViews

__all__ = ["InstanceAdmin", "StatechartAdminMixin", "StatechartStateFilter"]


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Instance]
else:  # ModelAdmin is generic for the type checker only
    _ModelAdmin = admin.ModelAdmin


class InstanceAdmin(ReadViews, ActionViews, BulkViews, OutboxViews, _ModelAdmin):
    """Browse instances held in Redis; actions behind their own permissions."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(PERM_VIEW))

    def has_view_permission(self, request: HttpRequest, obj: Instance | None = None) -> bool:
        return bool(request.user.has_perm(PERM_VIEW))

    # Nothing here is a database row: the admin's own add/change/delete
    # machinery stays off; writes are the explicit actions.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Instance | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Instance | None = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        site = self.admin_site

        def page(view: Callable[..., HttpResponse], route: str, name: str) -> URLPattern:
            return path(route, site.admin_view(view), name=f"django_xsm_{name}")

        return [
            page(self.machines_view, "", "instance_changelist"),
            page(self.find_view, "find/", "find"),
            page(self.list_view, "m/<str:machine>/", "machine"),
            page(self.detail_view, "m/<str:machine>/instance/", "detail"),
            page(self.send_view, "m/<str:machine>/send/", "send"),
            page(self.fire_view, "m/<str:machine>/fire/", "fire"),
            page(self.forget_view, "m/<str:machine>/forget/", "forget"),
            page(self.bulk_view, "bulk/", "bulk"),
            page(self.outbox_view, "outbox/", "outbox"),
            page(self.outbox_redrive_view, "outbox/redrive/", "outbox_redrive"),
            page(self.outbox_redrive_all_view, "outbox/redrive-all/", "outbox_redrive_all"),
            page(self.change_redirect, "<path:object_id>/change/", "instance_change"),
        ]


admin.site.register(Instance, InstanceAdmin)
