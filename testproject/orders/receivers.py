"""Side effects of transitions, run after they are durably stored.

``post_transition`` fires once per accepted event, after the commit: the
place for e-mails and calls to other systems (a view that is retried after
a version conflict runs again, a receiver does not).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from django.dispatch import receiver

from django_xsm.signals import post_transition

logger = logging.getLogger("testproject.orders")

#: What the demo "sent"; tests read it (a real app would e-mail or enqueue).
OUTBOX: deque[dict[str, Any]] = deque(maxlen=100)


@receiver(post_transition, dispatch_uid="orders.notify_customer")
def notify_customer(
    sender: str, *, machine: str, key: str, event: str, to_state: Any, version: int, **kw: Any
) -> None:
    if machine != "order" or to_state not in ("paid", "shipped", "cancelled"):
        return
    message = {"key": key, "state": to_state, "event": event, "version": version}
    OUTBOX.append(message)
    logger.info("notify customer of %s: now %s (v%d)", key, to_state, version)
