"""Signals sent around transitions of persisted instances (arguments and
guarantees: docs/django.md, Signals).

``pre_transition``: inside ``send()``, before the engine; a receiver may
raise to refuse the event. ``post_commit``: once per committed block, right
after the Redis commit, inside the caller's transaction.
``post_transition``: once per accepted event, only after the commit is
durable (inside ``transaction.atomic()``: on its commit). The sender is the
registered machine name.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["post_commit", "post_transition", "pre_transition"]

pre_transition = Signal()
post_commit = Signal()
post_transition = Signal()
