"""A decorated view whose transition emits (the outbox tests' urlconf)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path

from django_xsm.decorators import stateful_view


@stateful_view("shipment", key="shipment:{sid}")
def pay(request: HttpRequest, sid: str, *, instance: Any) -> HttpResponse:
    instance.send("PAY")
    return JsonResponse({"state": instance.value}, status=201)


urlpatterns = [path("shipments/<slug:sid>/pay", pay)]
