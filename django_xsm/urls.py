"""``path("", include("django_xsm.urls"))`` mounts ``/_xsm/health`` (liveness)
``/_xsm/ready`` (readiness) and ``/_xsm/problems/<slug>`` (what a problem
``type`` means), see :mod:`django_xsm.views`; and ``/_xsm/stream/<key>``, an
instance's transitions as server-sent events, see :mod:`django_xsm.stream`."""

from __future__ import annotations

from django.urls import path

from . import stream, views

app_name = "django_xsm"

urlpatterns = [
    path("_xsm/health", views.health, name="health"),
    path("_xsm/ready", views.ready, name="ready"),
    path("_xsm/problems/<slug:slug>", views.problem, name="problem"),
    path("_xsm/stream/<path:key>", stream.stream, name="stream"),
]
