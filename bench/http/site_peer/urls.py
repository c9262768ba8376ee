from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [path("orders/<int:order_id>/pay", views.pay)]
