"""Helpers for the engine tests (no Django, no Redis)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_xsm.engine import Event, MachineLogic

from .microsteps import check_legal, watching


@pytest.fixture(autouse=True)
def legal_configurations() -> Iterator[None]:
    """Every microstep of every engine test leaves a legal configuration."""
    with watching(check_legal):
        yield


class Recorder:
    """Logic whose actions append ``(name, event type)`` to ``calls``."""

    def __init__(self, *names: str) -> None:
        self.calls: list[tuple[str, str]] = []
        self.names = names

    def action(self, name: str) -> Callable[..., None]:
        def run(instance: Any, context: dict[str, Any], event: Event, action: Any) -> None:
            self.calls.append((name, event.type))

        return run

    def logic(self, **extra: Any) -> MachineLogic:
        actions = {n: self.action(n) for n in self.names}
        actions.update(extra.pop("actions", {}))
        return MachineLogic(actions=actions, **extra)

    def take(self) -> list[tuple[str, str]]:
        out, self.calls = self.calls, []
        return out


@pytest.fixture
def recorder() -> Callable[..., Recorder]:
    return Recorder


ORDER: dict[str, Any] = {
    "id": "order",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {"on": {"ADD": {"actions": "add"}, "PAY": "paid", "NOOP": {}}},
        "paid": {"on": {"SHIP": "shipped"}},
        "shipped": {"type": "final"},
    },
}


def add(instance: Any, context: dict[str, Any], event: Event, action: Any) -> None:
    context["items"] += event.get("qty", 1)


ORDER_LOGIC = MachineLogic(actions={"add": add})
