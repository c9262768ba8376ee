"""Model-bound views of the field tests: ``@stateful_view(model=...)``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.http import HttpRequest, JsonResponse

from django_xsm.decorators import stateful_view
from tests.fieldapp.models import Order, SlugOrder, Ticket

#: ``HOOK["split"](parent, child)``: runs in the split view once it created its row.
HOOK: dict[str, Callable[..., Any]] = {}


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


@stateful_view("shop", key="shop:{name}")
def send_key(request: HttpRequest, name: str, *, instance: Any) -> JsonResponse:
    """A key-based view sending the JSON body (no row: checks get the key)."""
    instance.send(json.loads(request.body))
    return JsonResponse({"key": instance.key, "state": instance.value})


@stateful_view("shop", key="shop:{name}")
async def asend_key(request: HttpRequest, name: str, *, instance: Any) -> JsonResponse:
    await instance.asend(json.loads(request.body))
    return JsonResponse({"key": instance.key, "state": instance.value})


@stateful_view(model=SlugOrder, lookup="slug", url_kwarg="name", idempotent=True)
def add(request: HttpRequest, name: str, *, instance: Any, row: SlugOrder) -> JsonResponse:
    instance.send("ADD")
    return JsonResponse({"items": instance.context["items"]}, status=201)


@stateful_view(model=Ticket, create=False)
def assign(request: HttpRequest, pk: UUID, *, instance: Any, row: Ticket) -> JsonResponse:
    instance.send("ASSIGN")
    return JsonResponse({"ticket": str(row.pk), "state": instance.value})


@stateful_view(model=Ticket)
def split(request: HttpRequest, pk: UUID, *, instance: Any, row: Ticket) -> JsonResponse:
    """Writes a row (a follow-up ticket) and notes it on this ticket."""
    child = Ticket.objects.create(title=f"follow-up of {row.pk}")
    hook = HOOK.get("split")
    if hook is not None:
        hook(row, child)
    instance.send("NOTE")
    return JsonResponse({"created": str(child.pk)}, status=201)
