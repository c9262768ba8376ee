"""Outbox handlers that hand events to Celery (``pip install
'django-xsm[celery]'``; docs/outbox.md, Celery): :func:`forwarder` for a
named task, :func:`forward` for the task named by the event type. The
stable delivery id is the task id, the key a task uses to do its work once.

Celery is imported on the first call (or when a forwarder is built), never
by importing this module or :mod:`django_xsm.outbox`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm.brief import brief
from django_xsm.persistence.outbox import Delivery

from .handlers import Handler

__all__ = ["delivery_kwargs", "forward", "forwarder"]

_MISSING = (
    "Celery is not installed: pip install 'django-xsm[celery]' to forward outbox events to it"
)


def _require_celery() -> None:
    if importlib.util.find_spec("celery") is None:
        raise ImproperlyConfigured(_MISSING)


def _current_app() -> Any:
    _require_celery()
    return importlib.import_module("celery").current_app


def delivery_kwargs(delivery: Delivery) -> dict[str, Any]:
    """The ``delivery`` keyword argument the task receives (JSON values)."""
    return {
        "delivery_id": delivery.delivery_id,
        "key": delivery.key,
        "machine": delivery.machine,
        "version": delivery.version,
        "attempt": delivery.attempt,
    }


def _send(app: Any, name: str, event: Mapping[str, Any], delivery: Delivery, **options: Any) -> Any:
    return app.send_task(
        name,
        args=[dict(event)],
        kwargs={"delivery": delivery_kwargs(delivery)},
        task_id=delivery.delivery_id,
        **options,
    )


def forwarder(task_name: str, *, app: Any = None, **options: Any) -> Handler:
    """A handler sending every event it gets to the Celery task ``task_name``.

    ``app``: a Celery app (default: Celery's current app, looked up at each
    call, so the app your project configures at start-up is the one used).
    ``options`` go to ``send_task`` as they are (``queue=``, ``priority=``,
    ``expires=``...). Assign the result to a module-level name and put its
    dotted path in ``HANDLERS``.
    """
    if not isinstance(task_name, str) or not task_name:
        raise ImproperlyConfigured(
            f"forwarder() needs the task's name, e.g. forwarder('shop.tasks.charge'); "
            f"got {brief(task_name)}"
        )
    if app is None:
        _require_celery()

    def handler(event: dict[str, Any], /, *, delivery: Delivery) -> object:
        return _send(
            app if app is not None else _current_app(), task_name, event, delivery, **options
        )

    handler.__name__ = handler.__qualname__ = f"forwarder({task_name!r})"
    return handler


def forward(event: dict[str, Any], /, *, delivery: Delivery) -> object:
    """A ready handler: sends the event to the Celery task named by its type
    (``"shop.tasks.charge"`` goes to task ``shop.tasks.charge``), on
    Celery's current app. Route a family of types to it, e.g.
    ``"shop.tasks.*": "django_xsm.outbox.celery.forward"``."""
    return _send(_current_app(), str(event["type"]), event, delivery)
