"""django-health-check's page with the XSM check, the way each major
version mounts it: 3.x through ``health_check.urls`` (its plugin registry),
4.x through a ``HealthCheckView`` listing its checks."""

from __future__ import annotations

from django.urls import include, path

from django_xsm.contrib.health_check.checks import PLUGIN_DIRECTORY

urlpatterns = [path("", include("django_xsm.urls"))]  # /_xsm/ready, to compare with

if PLUGIN_DIRECTORY:
    urlpatterns.append(path("ht/", include("health_check.urls")))
else:
    from health_check.views import HealthCheckView

    urlpatterns.append(
        path(
            "ht/",
            HealthCheckView.as_view(checks=["django_xsm.contrib.health_check.XsmHealthCheck"]),
            name="ht",
        )
    )
