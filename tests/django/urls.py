from __future__ import annotations

from django.urls import include, path

from . import views

_VIEWS = [
    "bump", "abump", "close", "aclose", "show", "ashow", "gated", "agated", "locked",
    "alocked", "racy", "racy_no_retry", "aracy", "optional_key", "big", "binary", "template",
    "fail", "reject", "boom", "callable_key", "unknown_machine", "manager_get", "amanager_get",
    "splat", "splat_mapping", "asplat_mapping", "manager_send",
    "lenient_mapping", "reserved_probe", "probe_lock", "aprobe_lock",
]  # fmt: skip

urlpatterns = [
    path("", include("django_xsm.urls")),
    path("plain", views.plain),
    # <str:...> on purpose: the tests send hostile keys through it.
    path("loose/<str:tid>", views.loose),
    path("cbv/<slug:tid>", views.TicketView.as_view()),
    path("acbv/<slug:tid>", views.AsyncTicketView.as_view()),
    *[path(f"t/<slug:tid>/{name}", getattr(views, name)) for name in _VIEWS],
]
