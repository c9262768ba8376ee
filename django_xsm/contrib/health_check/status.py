"""Is the XSM store ready? The question ``/_xsm/ready`` asks, in words a
health page may show.

The same steps as :func:`django_xsm.views.ready` (docs/observability.md,
django-health-check). Messages name the failure's class or Redis' reply
code and the backend's safe description, never a host, port, URL or
password.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_xsm.exceptions import StoreUnavailableError, XsmError

__all__ = ["CONFIGURATION", "STORE", "StoreStatus", "store_status"]

logger = logging.getLogger("django_xsm.contrib.health_check")

#: ``StoreStatus.problem``: the store cannot be reached or refuses writes.
STORE = "store"
#: ``StoreStatus.problem``: the deployment is wrong (settings, machines,
#: refused credentials, a namespace of another layout).
CONFIGURATION = "configuration"

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _token(value: Any) -> str:
    """A reason code as Redis or redis-py name it (``ConnectionError``,
    ``READONLY``); anything else (text that might hold an address) is
    ``unknown``."""
    text = str(value or "")
    return text if _TOKEN.fullmatch(text) else "unknown"


@dataclass(frozen=True, slots=True)
class StoreStatus:
    """``ok``, else ``problem`` (:data:`STORE` or :data:`CONFIGURATION`);
    ``message`` is safe to show; ``latency_ms`` of the health check when
    the store answered; ``namespace_reset`` when Redis lost this
    namespace's data since the process first saw it (still ok: the store
    works)."""

    ok: bool
    message: str
    problem: str = ""
    latency_ms: float | None = None
    namespace_reset: bool = False


def store_status() -> StoreStatus:
    """Ask the configured store whether it is ready (never raises)."""
    from django_xsm import backend
    from django_xsm.registry import machines

    try:
        found = backend.get_backend()
        problems = machines.problems
    except StoreUnavailableError as exc:
        return StoreStatus(False, f"XSM store unavailable ({_token(exc.cause)})", STORE)
    except ImproperlyConfigured:
        return StoreStatus(
            False, "XSM settings name no usable store (run manage.py check)", CONFIGURATION
        )
    except XsmError as exc:
        return StoreStatus(
            False, f"XSM store is misconfigured ({type(exc).__name__})", CONFIGURATION
        )
    if problems:
        names = ", ".join(sorted({p.name for p in problems}))
        return StoreStatus(
            False, f"XSM machines failed to load: {names} (run manage.py check)", CONFIGURATION
        )
    info = found.store.health()
    latency = info.get("latency_ms")
    if not info.get("ok"):
        reason = _token(info.get("error"))
        if info.get("credentials_refused"):
            return StoreStatus(
                False, f"XSM store refused the credentials ({reason})", CONFIGURATION
            )
        return StoreStatus(False, f"XSM store unavailable ({reason})", STORE)
    reset = bool(info.get("namespace_reset"))
    if reset:
        logger.warning("The XSM store lost this namespace's data since this process started")
    return StoreStatus(True, f"{found.description}: {latency} ms", "", latency, reset)
