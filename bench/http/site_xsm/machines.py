"""The benchmark's order chart (``../chart.json``) for django-xsm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django_xsm.engine import MachineLogic, create_machine

CONFIG: dict[str, Any] = json.loads((Path(__file__).parents[1] / "chart.json").read_text())


def record_payment(instance: Any, context: dict[str, Any], event: Any, action: Any) -> None:
    context["payments"] += 1
    context["paid_cents"] += event["amount_cents"]


order = create_machine(CONFIG, logic=MachineLogic(actions={"recordPayment": record_payment}))
