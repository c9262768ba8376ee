"""``@stateful_view``: one persisted instance per request, committed once.

::

    @stateful_view("order", key="order:{order_id}")
    def pay(request, order_id, *, instance):
        instance.send("PAY", amount=request.POST["amount"])
        return JsonResponse({"state": instance.value})

The instance is opened (lock, idempotency claim, load: one round trip)
before the view runs and committed (one more) after it returns; a view
that raises writes nothing. What else a decorated view may rely on
(idempotency replays, strict sends, ``PERMISSIONS``, conflict re-runs,
the row's ``transaction.atomic()``) is listed in docs/django.md.

Sync views run on the process's sync client, ``async def`` views on the
event loop's asyncio client; both behave the same.
"""

from __future__ import annotations

import contextlib
import functools
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.exceptions import ImproperlyConfigured, RequestDataTooBig
from django.db import models, router, transaction
from django.http import HttpRequest, HttpResponseBase

from django_xsm import backend, conf, http
from django_xsm.brief import brief
from django_xsm.engine import to_event
from django_xsm.exceptions import (
    EventPermissionError,
    InvalidConfigError,
    InvalidEventError,
    XsmError,
)
from django_xsm.persistence import aretry_on_conflict, retry_on_conflict
from django_xsm.persistence.arguments import validate_key
from django_xsm.persistence.block import PersistedInstance
from django_xsm.persistence.locks import LockStrategy

from .fields.events import may_send
from .fields.row_lookup import RowBinding
from .managers import OpenOptions
from .middleware import RequestInfo, get_request_info
from .registry import VIEW, MachineEntry, machines

__all__ = ["ViewInstance", "stateful_view"]

V = TypeVar("V", bound=Callable[..., Any])
KeyFn = Callable[[HttpRequest, tuple[Any, ...], dict[str, Any]], str]
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _key_builder(key: str | Callable[..., str]) -> KeyFn:
    if callable(key):
        fn = key
        return lambda request, args, kwargs: fn(request, *args, **kwargs)
    if not isinstance(key, str) or not key:
        raise ImproperlyConfigured(
            "stateful_view(key=...) must be a template such as 'order:{order_id}' or a "
            "callable (request, *args, **kwargs) -> str"
        )
    fields: list[str] = []
    for _literal, name, spec, conversion in string.Formatter().parse(key):
        if name is None:
            continue
        # Plain names only: '{x.attr}' or '{x[0]}' would let a template reach
        # into objects, and format specs hide what the key really is.
        if not name.isidentifier() or spec or conversion:
            raise ImproperlyConfigured(
                f"stateful_view key template {key!r}: field {{{name}}} must be a plain "
                "URL keyword argument name (no attributes, indexes or format specs)"
            )
        fields.append(name)

    def build(request: HttpRequest, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        missing = [f for f in fields if f not in kwargs]
        if missing:
            raise ImproperlyConfigured(
                f"stateful_view key template {key!r} needs the URL keyword argument "
                f"{missing[0]!r}; this URL pattern passes {sorted(kwargs) or 'none'}"
            )
        return key.format_map({f: kwargs[f] for f in fields})

    return build


def _methods(idempotent: Iterable[str] | bool | None) -> frozenset[str] | None:
    if idempotent is None:
        return None  # read from settings per request, so overrides apply
    if idempotent is True:
        return _UNSAFE
    if idempotent is False:
        return frozenset()
    if isinstance(idempotent, str):
        idempotent = [idempotent]
    methods = frozenset(m.upper() for m in idempotent)
    wrong = sorted(methods - _UNSAFE)
    if wrong:
        raise ImproperlyConfigured(
            f"stateful_view(idempotent=...): {wrong[0]} cannot carry an idempotency key; "
            "use POST, PUT, PATCH or DELETE"
        )
    return methods


def _binding(
    machine: str | None,
    key: Any,
    model: type[models.Model] | None,
    lookup: str,
    url_kwarg: str | None,
    field: str | None,
) -> RowBinding | None:
    """The model binding of ``@stateful_view(model=...)``, or None for a
    key-based view (which needs ``machine`` and ``key``)."""
    if model is None:
        if not isinstance(machine, str) or not machine or key is None:
            raise ImproperlyConfigured(
                "stateful_view needs a machine and a key ('order', key='order:{order_id}') "
                "or a model (model=Order)"
            )
        return None
    if machine is not None or key is not None:
        raise ImproperlyConfigured(
            "stateful_view(model=...) takes the machine and the key from the model's "
            "StatechartField; drop machine= and key="
        )
    return RowBinding(model, lookup=lookup, url_kwarg=url_kwarg, field=field)


#: send() keywords a view may not pass: the request decides who acts and
#: under which id, so a payload splatted into send() cannot forge them.
_REQUEST_OWNED = ("actor", "correlation_id")
#: What django-xsm's own workers send with (reserved events): not for views.
_WORKERS_ONLY = ("send_reserved", "asend_reserved")


@dataclass(frozen=True, slots=True)
class _SendPermission:
    """The machine's ``PERMISSIONS`` asked for one request's sends:
    ``may_send(entry, event_type, request.user, target)``, the rule of the
    admin and DRF. ``target`` is the row of a model-bound view, else the
    instance key. A request without a user (no ``AuthenticationMiddleware``)
    is refused every guarded event: no user is not a user the rules grant."""

    entry: MachineEntry
    request: HttpRequest
    target: object

    def guarded(self, event: object) -> tuple[object, str | None]:
        """``event`` and, when the machine's rules guard its type, the type.
        A guarded event comes back normalized (an ``Event``): the type that
        was checked is the type that is sent."""
        if not self.entry.permissions:
            return event, None  # no rules: the send is today's, untouched
        normalized = to_event(event)  # an unusable event: the send's own 400
        if normalized.type == VIEW or normalized.type not in self.entry.permissions:
            return normalized, None  # "xsm.view" is no event: the send refuses it (reserved)
        return normalized, normalized.type

    def check(self, event_type: str) -> None:
        """Raise ``EventPermissionError`` unless the request's user may send
        ``event_type``. Sync code (``has_perm`` and checks may use the ORM)."""
        user = getattr(self.request, "user", None)
        if user is not None and may_send(self.entry, event_type, user, self.target):
            return
        target = (
            str(self.target._meta.verbose_name)
            if isinstance(self.target, models.Model)
            else "instance"
        )
        raise EventPermissionError(event_type, machine=self.entry.name, target=target)


class ViewInstance:
    """What a decorated view receives as ``instance``: the open block, except
    that its ``send()`` / ``asend()`` refuse ``actor=`` and
    ``correlation_id=`` (the request's own are recorded, so a body splatted
    into ``send()`` cannot rewrite the audit trail), ask the machine's
    ``PERMISSIONS`` (docs/django.md), and it has no ``send_reserved()``."""

    __slots__ = ("_block", "_permission")

    def __init__(self, block: PersistedInstance, permission: _SendPermission) -> None:
        object.__setattr__(self, "_block", block)
        object.__setattr__(self, "_permission", permission)

    def __getattr__(self, name: str) -> Any:
        if name in _WORKERS_ONLY:
            raise AttributeError(
                f"{name}() is not available in a @stateful_view: reserved events "
                "(xstate.*, xsm.*) are sent only by django-xsm's timer scanner and outbox worker"
            )
        return getattr(self._block, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._block, name, value)

    @staticmethod
    def _refuse(event: object, kwargs: dict[str, Any]) -> None:
        for name in _REQUEST_OWNED:
            if name in kwargs:
                etype = event if isinstance(event, str) else "EVENT"
                raise InvalidEventError(
                    f"send(..., {name}=...) is not allowed in a @stateful_view: the "
                    f"{name.replace('_', ' ')} is the request's",
                    event=event,
                    hint=f"to send a payload field named {name!r}, pass a mapping event: "
                    f"instance.send({{'type': {etype!r}, {name!r}: ...}})",
                )

    def send(self, event: object, /, **kwargs: Any) -> Any:
        self._refuse(event, kwargs)
        event, guarded = self._permission.guarded(event)
        if guarded is not None:
            self._permission.check(guarded)
        return self._block.send(event, **kwargs)

    async def asend(self, event: object, /, **kwargs: Any) -> Any:
        self._refuse(event, kwargs)
        event, guarded = self._permission.guarded(event)
        if guarded is not None:
            # request.user, has_perm() and checks may query the database
            await sync_to_async(self._permission.check)(guarded)
        return await self._block.asend(event, **kwargs)

    def __repr__(self) -> str:
        return repr(self._block)


def _row_transaction(row: models.Model | None) -> contextlib.AbstractContextManager[Any]:
    """A model-bound view's attempt runs in a transaction of its row's
    database: what the view writes there commits after the Redis commit,
    and rolls back when the block fails (a 503 then means nothing was
    written) or is run again on a conflict. Key-based views open none."""
    if row is None:
        return contextlib.nullcontext()
    return transaction.atomic(using=row._state.db or router.db_for_write(type(row)))


def _error_response(exc: XsmError | RequestDataTooBig, request: HttpRequest) -> HttpResponseBase:
    """The HTTP answer to ``exc``; re-raised when Django should show it
    (an unmapped error while ``DEBUG`` is on)."""
    if isinstance(exc, RequestDataTooBig):  # the fingerprint's or the view's request.body
        return http.body_too_large_response(request)
    response = http.error_response(exc, request)
    if response is None:
        raise exc
    return response


@dataclass(frozen=True, slots=True)
class _Call:
    """Everything one request needs before the block opens."""

    entry: MachineEntry
    key: str
    info: RequestInfo
    idempotency_key: str | None
    fingerprint: str


def stateful_view(
    machine: str | None = None,
    *,
    key: str | Callable[..., str] | None = None,
    model: type[models.Model] | None = None,
    lookup: str = "pk",
    url_kwarg: str | None = None,
    field: str | None = None,
    create: bool = True,
    lock: str | LockStrategy | None = None,
    strict: bool = True,
    idempotent: Iterable[str] | bool | None = None,
    retries: int | None = None,
) -> Callable[[V], V]:
    """Run the view inside a persisted block of ``machines[machine]``.

    ``key``: a template over the URL kwargs (``"order:{order_id}"``) or a
    callable ``(request, *args, **kwargs) -> str``. ``create=False``: 404
    when the instance does not exist. ``lock``: ``"adaptive"``,
    ``"optimistic"``, ``"pessimistic"``, a strategy, or None for
    ``XSM['LOCK']`` (adaptive by default: the first attempt takes no lock,
    a re-run after a conflict waits in the lock's queue). ``strict``:
    refuse (409) events the current state does not take. ``idempotent``:
    methods that require an ``Idempotency-Key`` (None: the setting; True:
    every unsafe method; False: none). ``retries``: conflict re-runs
    (None: ``CONFLICT_RETRIES``).

    The view is called as ``view(request, *args, instance=block, **kwargs)``.

    Bound to a model instead (``@stateful_view(model=Order)``): the row is
    looked up by ``lookup`` (default ``"pk"``) from the URL kwarg
    ``url_kwarg`` (default: the lookup's name) and the block is the row's
    ``StatechartField`` (``field``: its name, when the model has several);
    the view is called with ``row=`` as well, a missing row is a 404, and
    the row's projection moves forward after the commit.
    """
    binding = _binding(machine, key, model, lookup, url_kwarg, field)
    machine_name = binding.field.machine_name if binding is not None else str(machine)
    build_key = _key_builder(key) if binding is None and key is not None else None
    required = _methods(idempotent)
    if not (
        lock is None
        or isinstance(lock, LockStrategy)
        or lock in ("adaptive", "optimistic", "pessimistic")
    ):
        raise ImproperlyConfigured(
            f"stateful_view(lock={brief(lock)}): "
            "use 'adaptive', 'optimistic', 'pessimistic' or a LockStrategy"
        )
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
    ):
        raise ImproperlyConfigured(f"stateful_view(retries={brief(retries)}) must be an int >= 0")

    def prepare(
        request: HttpRequest,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        row: models.Model | None = None,
    ) -> _Call | HttpResponseBase:
        for reserved in ("instance", "row") if binding is not None else ("instance",):
            if reserved in kwargs:
                raise ImproperlyConfigured(
                    f"stateful_view passes {reserved!r} to the view; rename the URL kwarg"
                )
        info = get_request_info(request)
        entry = machines[machine_name]
        if binding is not None and row is not None:
            instance_key = binding.statechart(row).key
        else:
            assert build_key is not None
            instance_key = build_key(request, args, kwargs)
        if not isinstance(instance_key, str):
            raise ImproperlyConfigured(
                f"stateful_view key callable returned {type(instance_key).__name__}, not str"
            )
        try:
            validate_key(instance_key)
        except InvalidConfigError as exc:
            return http.invalid_key_response(request, exc.message)
        methods = conf.get_settings().idempotency.required if required is None else required
        idem = info.key_for(request.method or "GET", methods)
        fingerprint = http.request_fingerprint(request) if idem is not None else ""
        return _Call(entry, instance_key, info, idem, fingerprint)

    def options(call: _Call, strategy: LockStrategy) -> OpenOptions:
        return {
            "actor": call.info.actor,
            "idempotency_key": call.idempotency_key,
            "fingerprint": call.fingerprint,
            "principal": call.info.principal if call.idempotency_key is not None else "",
            "create": create,
            "strict": strict,
            "lock": strategy,
            "correlation_id": call.info.correlation_id,
        }

    def opener(call: _Call, row: models.Model | None, strategy: LockStrategy, aio: bool) -> Any:
        """The block's context manager (``aio``: the asyncio one)."""
        opts = options(call, strategy)
        if binding is not None and row is not None:
            bound = binding.statechart(row)
            return bound.aopen(**opts) if aio else bound.open(**opts)
        objects = call.entry.objects
        return objects.aopen(call.key, **opts) if aio else objects.open(call.key, **opts)

    def permission(call: _Call, request: HttpRequest, row: models.Model | None) -> _SendPermission:
        return _SendPermission(call.entry, request, row if row is not None else call.key)

    def attempts() -> int:
        return 1 + (conf.get_settings().conflict_retries if retries is None else retries)

    def remember(
        block: PersistedInstance, call: _Call, response: object, view: Callable[..., object]
    ) -> HttpResponseBase:
        if not isinstance(response, HttpResponseBase):
            raise ValueError(
                f"The view {view.__module__}.{view.__qualname__} didn't return an "
                f"HttpResponse object. It returned {type(response).__name__} instead."
            )
        if call.idempotency_key is None:
            return response
        render = getattr(response, "render", None)
        if callable(render) and not getattr(response, "is_rendered", True):
            render()  # inside the block: a template error commits nothing
        limit = conf.get_settings().idempotency.max_response_bytes
        block.set_result(http.capture_response(response, limit))
        return response

    def decorate(view: V) -> V:
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(
                request: HttpRequest, *args: Any, **kwargs: Any
            ) -> HttpResponseBase:
                try:
                    # Resolve actor and principal first: a key callable may
                    # read them, and request.user must not be touched
                    # synchronously on the event loop.
                    await get_request_info(request).aresolve()
                    row = await binding.arow(kwargs) if binding is not None else None
                    call = prepare(request, args, kwargs, row)
                    if isinstance(call, HttpResponseBase):
                        return call
                    extra = {"row": row} if binding is not None else {}

                    async def attempt(strategy: LockStrategy) -> HttpResponseBase:
                        async with opener(call, row, strategy, aio=True) as block:
                            if block.duplicate:
                                return http.replay_response(block.replayed_result, request)
                            instance = ViewInstance(block, permission(call, request, row))
                            response = await view(
                                request, *args, instance=instance, **extra, **kwargs
                            )
                            return remember(block, call, response, view)

                    return await aretry_on_conflict(
                        attempt, attempts=attempts(), lock=backend.lock_strategy(lock)
                    )
                except (XsmError, RequestDataTooBig) as exc:
                    return _error_response(exc, request)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            try:
                row = binding.row(kwargs) if binding is not None else None
                call = prepare(request, args, kwargs, row)
                if isinstance(call, HttpResponseBase):
                    return call
                extra = {"row": row} if binding is not None else {}

                def attempt(strategy: LockStrategy) -> HttpResponseBase:
                    with _row_transaction(row), opener(call, row, strategy, aio=False) as block:
                        if block.duplicate:
                            return http.replay_response(block.replayed_result, request)
                        instance = ViewInstance(block, permission(call, request, row))
                        response = view(request, *args, instance=instance, **extra, **kwargs)
                        return remember(block, call, response, view)

                return retry_on_conflict(
                    attempt, attempts=attempts(), lock=backend.lock_strategy(lock)
                )
            except (XsmError, RequestDataTooBig) as exc:
                return _error_response(exc, request)

        return wrapper  # type: ignore[return-value]

    return decorate
