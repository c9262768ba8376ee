"""Outbox handlers of the tests: they record what they were called with.

``CALLS`` holds ``(handler name, event, delivery)`` in call order;
``FAIL`` makes ``flaky`` raise that many more times (``-1``: always).
"""

from __future__ import annotations

import os
from typing import Any

import redis

from django_xsm.outbox import Delivery

CALLS: list[tuple[str, dict[str, Any], Delivery]] = []
FAIL = {"flaky": 0}
#: Not callable: HANDLERS pointing here is an error.
NOT_A_HANDLER = {"a": 1}


def record(event: dict[str, Any], *, delivery: Delivery) -> None:
    CALLS.append(("record", event, delivery))


def catch_all(event: dict[str, Any], *, delivery: Delivery) -> None:
    CALLS.append(("catch_all", event, delivery))


def flaky(event: dict[str, Any], *, delivery: Delivery) -> None:
    CALLS.append(("flaky", event, delivery))
    if FAIL["flaky"]:
        FAIL["flaky"] -= 1 if FAIL["flaky"] > 0 else 0
        raise ConnectionError(
            f"gateway down (card_number={event.get('card_number')}, token=abc123)"
        )


def noop(event: dict[str, Any], *, delivery: Delivery) -> None:
    """For the timing runs: as cheap as a handler gets."""


def no_delivery(event: dict[str, Any]) -> None:
    """Refused: cannot take delivery=."""


#: A Celery forwarder is put here by the Celery test (its app and queue are per run).
charge: Any = None


_tally_client: Any = None


def tally(event: dict[str, Any], *, delivery: Delivery) -> None:
    """Count each delivery in the live Redis (``{<prefix>}:tally``), so a test
    sees what several worker processes delivered, and how often."""
    global _tally_client
    if _tally_client is None:
        _tally_client = redis.Redis.from_url(os.environ["XSM_REDIS_URL"])
    prefix = os.environ["XSM_TEST_PREFIX"]
    _tally_client.hincrby(f"{{{prefix}}}:tally", delivery.delivery_id, 1)
