"""``path("", include("django_xsm.urls"))`` mounts ``/_xsm/health`` (liveness)
``/_xsm/ready`` (readiness) and ``/_xsm/problems/<slug>`` (what a problem
``type`` means); see :mod:`django_xsm.views`."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "django_xsm"

urlpatterns = [
    path("_xsm/health", views.health, name="health"),
    path("_xsm/ready", views.ready, name="ready"),
    path("_xsm/problems/<slug:slug>", views.problem, name="problem"),
]
