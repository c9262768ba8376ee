"""URLconf of the admin tests: the admin site, a test-only site for the
model-field app's ModelAdmins, and django-xsm's health views."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from .sites import shop_site

urlpatterns = [
    path("admin/", admin.site.urls),
    path("shop-admin/", shop_site.urls),
    path("", include("django_xsm.urls")),
]
