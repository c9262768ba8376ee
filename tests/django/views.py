"""Views the Django-layer tests call (sync and async twins)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.utils.decorators import method_decorator
from django.views import View

from django_xsm import backend
from django_xsm.decorators import stateful_view
from django_xsm.registry import machines

KEY = "ticket:{tid}"
#: Calls per view name (a retried view is called again).
CALLS: Counter[str] = Counter()
#: ``ENTERED[tid]`` is set when a gated view starts; it then waits for
#: ``RELEASE[tid]`` (tests coordinate concurrent requests with them).
ENTERED: dict[str, threading.Event] = {}
RELEASE: dict[str, threading.Event] = {}
#: ``RACES[tid]``: how many more times a racing writer commits first.
RACES: Counter[str] = Counter()


def gate(tid: str) -> tuple[threading.Event, threading.Event]:
    ENTERED[tid] = threading.Event()
    RELEASE[tid] = threading.Event()
    return ENTERED[tid], RELEASE[tid]


def _state(instance: Any) -> dict[str, Any]:
    return {"state": instance.value, "count": instance.context["count"], "key": instance.key}


@stateful_view("ticket", key=KEY)
def bump(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["bump"] += 1
    instance.send("BUMP")
    return JsonResponse(_state(instance), status=201)


@stateful_view("ticket", key=KEY)
async def abump(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["abump"] += 1
    instance.send("BUMP")
    return JsonResponse(_state(instance), status=201)


@stateful_view("ticket", key=KEY)
def close(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("CLOSE")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY)
async def aclose(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("CLOSE")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, create=False)
def show(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, create=False)
async def ashow(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY)
def gated(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["gated"] += 1
    ENTERED[tid].set()
    RELEASE[tid].wait(10)
    instance.send("BUMP")
    return JsonResponse(_state(instance), status=201)


@stateful_view("ticket", key=KEY)
async def agated(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["agated"] += 1
    ENTERED[tid].set()
    await asyncio.to_thread(RELEASE[tid].wait, 10)
    instance.send("BUMP")
    return JsonResponse(_state(instance), status=201)


@stateful_view("ticket", key=KEY, lock="pessimistic", idempotent=False)
def locked(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    ENTERED[tid].set()
    RELEASE[tid].wait(10)
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, lock="pessimistic", idempotent=False)
async def alocked(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BUMP")
    return JsonResponse(_state(instance))


def _race(tid: str) -> None:
    # Another writer commits between this block's load and its commit.
    if RACES[tid] > 0:
        RACES[tid] -= 1
        machines["ticket"].objects.send(f"ticket:{tid}", "BUMP", actor="racer")


@stateful_view("ticket", key=KEY, idempotent=False)
def racy(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["racy"] += 1
    _race(tid)
    instance.send("BUMP")
    return JsonResponse(_state(instance))


#: ``LOCKS_SEEN[tid]``: per attempt of a lock-probing view, the lock
#: strategy its block opened with, its token, and the key's lock holder.
LOCKS_SEEN: dict[str, list[tuple[str, str, str | None]]] = {}


def _seen_lock(tid: str, instance: Any) -> None:
    holder = backend.get_backend().store.lock_holder(f"ticket:{tid}")
    seen = (type(instance.options.lock).__name__, instance.token, holder)
    LOCKS_SEEN.setdefault(tid, []).append(seen)


@stateful_view("ticket", key=KEY, idempotent=False)
def probe_lock(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    _seen_lock(tid, instance)
    _race(tid)
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, idempotent=False)
async def aprobe_lock(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    await asyncio.to_thread(_seen_lock, tid, instance)
    await asyncio.to_thread(_race, tid)
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, idempotent=False, retries=0)
def racy_no_retry(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["racy_no_retry"] += 1
    _race(tid)
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, idempotent=False)
async def aracy(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["aracy"] += 1
    await asyncio.to_thread(_race, tid)
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, idempotent=False)
def optional_key(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["optional_key"] += 1
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY)
def big(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BUMP")
    return HttpResponse(b"x" * 5000, status=202, content_type="text/plain")


@stateful_view("ticket", key=KEY)
def binary(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BUMP")
    response = HttpResponse(bytes(range(256)), content_type="application/octet-stream")
    response["Location"] = f"/t/{tid}"
    return response


@stateful_view("ticket", key=KEY)
def template(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BUMP")
    return TemplateResponse(request, "django_xsm_tests/ticket.txt", _state(instance))


@stateful_view("ticket", key=KEY)
def fail(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BUMP")
    raise RuntimeError("the view failed after sending")


@stateful_view("ticket", key=KEY)
def reject(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    CALLS["reject"] += 1
    return JsonResponse({"error": "validation failed"}, status=400)


@stateful_view("ticket", key=KEY)
def boom(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BOOM")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=lambda request, tid: f"ticket:{tid}", idempotent=False)
def callable_key(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("ticket", key="ticket:{tid}", idempotent=False)
def loose(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    instance.send("BUMP")
    return JsonResponse(_state(instance))


@stateful_view("nope", key=KEY, idempotent=False)
def unknown_machine(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    return JsonResponse({})


def manager_get(request: HttpRequest, tid: str) -> HttpResponse:
    return JsonResponse(machines["ticket"].objects.get(f"ticket:{tid}").to_dict())


async def amanager_get(request: HttpRequest, tid: str) -> HttpResponse:
    view = await machines["ticket"].objects.aget(f"ticket:{tid}")
    return JsonResponse(view.to_dict())


def plain(request: HttpRequest) -> HttpResponse:
    info = request.xsm  # type: ignore[attr-defined]
    return JsonResponse(
        {
            "correlation_id": info.correlation_id,
            "idempotency_key": info.idempotency_key,
            "error": str(info.idempotency_error or ""),
            "actor": info.actor,
            "principal": info.principal,
        }
    )


class TicketView(View):
    """Class-based views take the decorator through method_decorator."""

    @method_decorator(stateful_view("ticket", key=KEY, create=False))
    def get(self, request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
        return JsonResponse(_state(instance))

    @method_decorator(stateful_view("ticket", key=KEY))
    def post(self, request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
        instance.send("BUMP")
        return JsonResponse(_state(instance), status=201)


class AsyncTicketView(View):
    @method_decorator(stateful_view("ticket", key=KEY))
    async def post(self, request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
        instance.send("BUMP")
        return JsonResponse(_state(instance), status=201)


@stateful_view("ticket", key=KEY)
def splat(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    """The pattern that let a body forge the actor: the body splatted into send()."""
    data = json.loads(request.body)
    instance.send(data.pop("type"), **data)
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY)
def splat_mapping(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    """The safe form: the body as a mapping event (every field is payload)."""
    instance.send(json.loads(request.body))
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY)
async def asplat_mapping(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    """The asyncio twin of :func:`splat_mapping`."""
    await instance.asend(json.loads(request.body))
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, strict=False)
def lenient_mapping(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    """:func:`splat_mapping` in a view that is not strict."""
    instance.send(json.loads(request.body))
    return JsonResponse(_state(instance))


@stateful_view("ticket", key=KEY, idempotent=False)
def reserved_probe(request: HttpRequest, tid: str, *, instance: Any) -> HttpResponse:
    """A view reaching for the workers' send_reserved(): not offered."""
    try:
        instance.send_reserved("xsm.outbox.failed")
    except AttributeError as exc:
        return JsonResponse({"refused": str(exc)})
    return JsonResponse(_state(instance))


def manager_send(request: HttpRequest, tid: str) -> HttpResponse:
    """A plain view sending through the manager: the request's user acts."""
    receipt = machines["ticket"].objects.send(KEY.format(tid=tid), "BUMP", create=True)
    return JsonResponse({"accepted": bool(receipt.accepted)})
