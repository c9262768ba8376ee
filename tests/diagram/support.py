"""What the diagram tests share: a transition log read from an engine
instance, the path of one chart, and the Graphviz requirement."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

import pytest

from django_xsm.engine import Machine


@dataclass(frozen=True)
class Record:
    """The fields of a transition-log record the diagram reads."""

    seq: int
    event_type: str
    from_state: Any
    to_state: Any
    accepted: bool = True


def walk(machine: Machine, *events: str) -> tuple[tuple[str, ...], list[Record]]:
    """Send ``events`` to a fresh instance; its active ids and the records
    a transition log would hold (refused events are not logged)."""
    instance = machine.start()
    records = []
    for event in events:
        before = instance.value
        receipt = instance.send(event)
        if receipt.accepted:
            records.append(Record(len(records) + 1, event, before, instance.value))
    return instance.state_ids, records


def graphviz_required() -> bool:
    """True in CI (``CI=true``) or with ``XSM_REQUIRE_GRAPHVIZ=1``: a missing
    ``dot`` fails the Graphviz tests there instead of skipping them."""
    return os.environ.get("XSM_REQUIRE_GRAPHVIZ") == "1" or os.environ.get("CI") == "true"


def need_dot() -> str:
    """The path of Graphviz's ``dot``; skips (fails where it is required)
    when it is not installed."""
    found = shutil.which("dot")
    if found is None:
        why = "Graphviz's dot is not on PATH (apt-get install graphviz; scripts/test does it)"
        if graphviz_required():
            pytest.fail(f"{why}, and CI=true or XSM_REQUIRE_GRAPHVIZ=1 require it")
        pytest.skip(why)
    return found
