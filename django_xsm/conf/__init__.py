"""The ``XSM`` setting: defaults, validation and one cached accessor.

::

    from django_xsm.conf import get_settings
    get_settings().prefix          # "shop"
    get_settings().idempotency.header

Every key, nested ones included, is checked (:mod:`.validation`). The parsed
settings are cached until Django sends ``setting_changed`` for one of
:data:`WATCHED` (``override_settings`` in tests); modules that cache things
built from settings register a callback with :func:`on_reset`.

This module imports nothing from the rest of django_xsm.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .validation import MAX_NUMBER, InvalidSettings, parse
from .values import (
    DEFAULTS,
    SAFE_METHODS,
    WATCHED,
    Audit,
    Durability,
    Idempotency,
    Outbox,
    Sentinel,
    Stream,
    Timers,
    XsmSettings,
)

__all__ = [
    "DEFAULTS",
    "MAX_NUMBER",
    "SAFE_METHODS",
    "WATCHED",
    "Audit",
    "Durability",
    "Idempotency",
    "InvalidSettings",
    "Outbox",
    "Sentinel",
    "Stream",
    "Timers",
    "XsmSettings",
    "get_settings",
    "on_reset",
    "parse",
    "reset",
]


@functools.lru_cache(maxsize=1)
def get_settings() -> XsmSettings:
    """The validated ``XSM`` settings (cached; see the module docstring).

    Raises ``ImproperlyConfigured`` naming the offending key.
    """
    return parse(
        getattr(django_settings, "XSM", None),
        debug=bool(django_settings.DEBUG),
        caches=getattr(django_settings, "CACHES", None),
    )


# --- reset ---------------------------------------------------------------------

_reset_callbacks: list[Callable[[], None]] = []
_reset_lock = threading.Lock()


def on_reset(callback: Callable[[], None]) -> Callable[[], None]:
    """Register ``callback`` to run whenever the settings are reloaded."""
    with _reset_lock:
        if callback not in _reset_callbacks:
            _reset_callbacks.append(callback)
    return callback


def reset() -> None:
    """Forget the cached settings and everything built from them."""
    get_settings.cache_clear()
    with _reset_lock:
        callbacks = list(_reset_callbacks)
    for callback in callbacks:
        callback()


@receiver(setting_changed)
def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in WATCHED:
        reset()
