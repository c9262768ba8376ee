from __future__ import annotations

import os

from django.urls import include, path

from . import views

# BENCH_ASYNC=1 (set for uvicorn): the same path served by the async view
view = views.apay if os.environ.get("BENCH_ASYNC") == "1" else views.pay
urlpatterns = [
    path("orders/<int:order_id>/pay", view),
    # /_xsm/problems/<type>: problem bodies then name their type (not about:blank)
    path("", include("django_xsm.urls")),
]
