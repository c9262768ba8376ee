from __future__ import annotations

from django.urls import include, path

from . import views

urlpatterns = [
    path("", include("tests.django.urls")),
    path("orders/<int:pk>/pay", views.pay),
    path("orders/<int:pk>/apay", views.apay),
    path("orders/<int:pk>/send_body", views.send_body),
    path("orders/<int:pk>/asend_body", views.asend_body),
    path("shop/<str:name>/send_key", views.send_key),
    path("shop/<str:name>/asend_key", views.asend_key),
    path("slug-orders/<str:name>/add", views.add),
    path("tickets/<uuid:pk>/assign", views.assign),
    path("tickets/<uuid:pk>/split", views.split),
]
