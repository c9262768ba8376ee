"""One persisted block: ``persisted()`` / ``apersisted()`` and what the
``with`` hands the body.

- :mod:`.options`: the block's and a send's options, checked once;
- :mod:`.state`: what a block knows and its pure steps (open result ->
  engine instance, one event, the commit unit);
- :mod:`.claims`: its idempotency claims;
- :mod:`.instance`: :class:`PersistedInstance` and :class:`Plugin`; the
  open / send / commit / release logic as generators of I/O requests
  (:mod:`.requests`);
- :mod:`.drivers`: ``persisted()`` (blocking) and ``apersisted()``
  (asyncio), which run those requests on the store, inbox and log.
"""

from __future__ import annotations

from .drivers import apersisted, persisted
from .instance import PersistedInstance, Plugin
from .options import BlockOptions, SendOptions

__all__ = ["BlockOptions", "PersistedInstance", "Plugin", "SendOptions", "apersisted", "persisted"]
