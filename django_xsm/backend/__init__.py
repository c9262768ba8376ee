"""The backend: the store, inbox, log, plugins and Redis clients a process
uses, built once from ``settings.XSM``.

* :mod:`.build` — the cached accessors (:func:`get_backend`,
  :func:`get_async_backend`, :func:`get_scanner`, :func:`get_outbox`,
  :func:`lock_strategy`)
  and django-xsm's clock (:func:`now_ms`, :func:`use_clock`);
* :mod:`.clients` — Redis clients from a URL, a django-redis cache alias or
  the embedded fakeredis;
* :mod:`.readiness` — whether the settings name a usable connection (the
  builder and ``manage.py check`` ask it the same question);
* :mod:`.transitions` — the plugin behind ``pre_transition`` /
  ``post_transition`` and the ``django_xsm.transitions`` log lines.

::

    from django_xsm.backend import get_backend
    get_backend().store.health()
"""

from .build import (
    AsyncBackend,
    Backend,
    BlockPlugin,
    MachineDirectory,
    clock_is_set,
    get_async_backend,
    get_backend,
    get_codec,
    get_inbox,
    get_log,
    get_outbox,
    get_scanner,
    get_store,
    lock_strategy,
    new_client,
    now_ms,
    reset,
    use_clock,
    use_machines,
)

__all__ = [
    "AsyncBackend",
    "Backend",
    "BlockPlugin",
    "MachineDirectory",
    "clock_is_set",
    "get_async_backend",
    "get_backend",
    "get_codec",
    "get_inbox",
    "get_log",
    "get_outbox",
    "get_scanner",
    "get_store",
    "lock_strategy",
    "new_client",
    "now_ms",
    "reset",
    "use_clock",
    "use_machines",
]
