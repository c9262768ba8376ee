"""One persisted block: ``persisted()`` / ``apersisted()`` (:mod:`.drivers`)
and :class:`PersistedInstance`, what the ``with`` hands the body
(:mod:`.instance`: the hooks and the open / send / commit generators;
:mod:`.state`: its pure steps; :mod:`.claims`: its idempotency claims;
:mod:`.options`: its options, checked once).
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
