"""Signals sent around transitions of persisted instances.

``pre_transition``
    Sent synchronously inside ``send()``, before the engine sees the event.
    A receiver may raise to refuse the event: the exception leaves the
    block and nothing is written. Receivers must be synchronous (in async
    views they run on the event loop thread: keep them fast, no I/O).

``post_transition``
    Sent once per accepted event, in order, only after the block's commit
    is durable, with the version the commit produced. Receivers may be sync
    or async (async blocks await them after the commit). An exception in a
    receiver is logged by Django (logger ``django.dispatch``) and does not
    undo or fail the request: the change is already stored.

Keyword arguments of both: ``machine`` (registered name), ``key``,
``event`` (type), ``payload`` (as sent, not redacted), ``actor``,
``correlation_id``. ``pre_transition`` adds ``state`` (value before) and
``instance`` (the open block); ``post_transition`` adds ``from_state``,
``to_state``, ``version`` and ``seq`` (the transition-log seq, 0 when audit
is off). The sender is the registered machine name (a ``str``); filter in
the receiver (``if machine == "order"``) rather than with ``sender=``.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["post_transition", "pre_transition"]

pre_transition = Signal()
post_transition = Signal()
