"""URLconf of the stream's server processes: the Django-layer test views
(commits over HTTP), django-xsm's endpoints, the admin and the demo."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("tests.django.urls")),
    path("", include("testproject.orders.urls")),
]
