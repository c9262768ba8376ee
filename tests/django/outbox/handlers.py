"""Outbox handlers of the tests: they record what they were called with.

``CALLS`` holds ``(handler name, event, delivery)`` in call order;
``FAIL`` makes ``flaky`` raise that many more times (``-1``: always).
"""

from __future__ import annotations

from typing import Any

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
