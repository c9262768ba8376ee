"""Model-bound views of the field tests: ``@stateful_view(model=...)``."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse

from django_xsm.decorators import stateful_view
from tests.fieldapp.models import Order, SlugOrder


@stateful_view(model=Order)
def pay(request: HttpRequest, pk: int, *, instance: Any, row: Order) -> JsonResponse:
    instance.send("PAY", amount=int(request.POST.get("amount", "0")))
    return JsonResponse({"order": row.pk, "state": instance.value, "total": row.total})


@stateful_view(model=Order)
async def apay(request: HttpRequest, pk: int, *, instance: Any, row: Order) -> JsonResponse:
    await instance.asend("PAY_ANYWAY")
    return JsonResponse({"order": row.pk, "state": instance.value})


@stateful_view(model=Order)
def send_body(request: HttpRequest, pk: int, *, instance: Any, row: Order) -> JsonResponse:
    """Sends the JSON body as one mapping event, as docs/django.md advises."""
    instance.send(json.loads(request.body))
    return JsonResponse({"order": row.pk, "state": instance.value})


@stateful_view(model=Order)
async def asend_body(request: HttpRequest, pk: int, *, instance: Any, row: Order) -> JsonResponse:
    await instance.asend(json.loads(request.body))
    return JsonResponse({"order": row.pk, "state": instance.value})


@stateful_view(model=SlugOrder, lookup="slug", url_kwarg="name", idempotent=True)
def add(request: HttpRequest, name: str, *, instance: Any, row: SlugOrder) -> JsonResponse:
    instance.send("ADD")
    return JsonResponse({"items": instance.context["items"]}, status=201)
