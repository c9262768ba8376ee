"""Signals sent around transitions of persisted instances.

``pre_transition``
    Sent synchronously inside ``send()``, before the engine sees the event.
    A receiver may raise to refuse the event: the exception leaves the
    block and nothing is written. Receivers must be synchronous (in async
    views they run on the event loop thread: keep them fast, no I/O).

``post_transition``
    Sent once per accepted event, in order, only after the block's commit
    is durable, with the version the commit produced. Sync blocks send it
    through ``transaction.on_commit`` of the block's database
    (``"default"``; a model field's blocks: the row's database): inside
    ``transaction.atomic()`` receivers run when the transaction commits
    and never when it rolls back; outside one, right away. Async blocks
    await them after the commit (Django runs no transaction around async
    code). Receivers may be sync or async. An exception in a receiver is
    logged by Django (logger ``django.dispatch``) and does not undo or fail
    the request: the change is already stored.

``post_commit``
    Sent once per committed block, right after the Redis commit and before
    ``post_transition``, synchronously: inside the caller's database
    transaction when one is open (async blocks: awaited after the block).
    Arguments: ``machine``, ``key``, ``value`` and ``state_ids`` (the
    committed state), ``version``. For your own projections that must move
    with the caller's transaction (a ``StatechartField``'s row has moved
    already: its block writes it before the signal); side effects belong in
    ``post_transition``.

Keyword arguments of both transition signals: ``machine`` (registered name), ``key``,
``event`` (type), ``payload`` (as sent, not redacted), ``actor``,
``correlation_id``. ``pre_transition`` adds ``state`` (value before) and
``instance`` (the open block); ``post_transition`` adds ``from_state``,
``to_state``, ``version`` and ``seq`` (the transition-log seq, 0 when audit
is off). The sender is the registered machine name (a ``str``); filter in
the receiver (``if machine == "order"``) rather than with ``sender=``.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["post_commit", "post_transition", "pre_transition"]

pre_transition = Signal()
post_commit = Signal()
post_transition = Signal()
