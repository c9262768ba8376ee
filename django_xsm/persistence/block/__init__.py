"""One persisted block: ``persisted()`` / ``apersisted()`` and what the
``with`` hands the body.

- :mod:`.options`: the block's and a send's options, checked once;
- :mod:`.state`: what a block knows and its pure steps (open result ->
  engine instance, one event, the commit unit);
- :mod:`.claims`: its idempotency claims;
- :mod:`.instance`: :class:`PersistedInstance`, :class:`Plugin` and the
  plugins every block of the process gets (:func:`add_process_plugin`);
  the open / send / commit / release logic as generators of I/O requests;
- :mod:`.phases`: how the block runs the observer hooks ``phase`` and
  ``on_replay``;
- :mod:`.drivers`: ``persisted()`` (blocking) and ``apersisted()``
  (asyncio), which run those requests on the store, inbox and log.
"""

from __future__ import annotations

from .drivers import apersisted, persisted
from .instance import (
    PersistedInstance,
    Plugin,
    add_process_plugin,
    process_plugins,
    remove_process_plugin,
)
from .options import BlockOptions, SendOptions

__all__ = [
    "BlockOptions",
    "PersistedInstance",
    "Plugin",
    "SendOptions",
    "add_process_plugin",
    "apersisted",
    "persisted",
    "process_plugins",
    "remove_process_plugin",
]
