"""django-xsm adapter for ``../shared/bench/peer_harness.py``.

Usage (from the repository root)::

    python ../shared/bench/peer_harness.py --engine --imports \\
        --adapter bench.xsm_adapter:Adapter --json /tmp/xsm-engine.json

Only the engine part lives here; ``make_sender`` / ``snapshot_size`` (the
persisted Redis round trip) are added with the Redis layer.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

# the harness's order chart, verbatim (kept here so the adapter does not
# import the harness module)
ORDER_CHART: dict[str, Any] = {
    "id": "order",
    "version": "1",
    "initial": "cart",
    "context": {"items": 0},
    "states": {
        "cart": {
            "on": {
                "ADD": {"target": "cart", "actions": "inc"},
                "PAY": "paid",
            }
        },
        "paid": {"type": "final"},
    },
}


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class Adapter:
    """The harness adapter interface (see ``UpstreamAdapter``)."""

    name = "django-xsm"

    def __init__(self) -> None:
        # the harness times these cold, in a fresh interpreter each, and
        # breaks the second-to-last one down with -X importtime: keep the
        # engine there
        targets = {"package": "import django_xsm"}
        if _exists("django_xsm.persistence"):
            targets["persistence"] = "import django_xsm.persistence"
        targets["engine"] = "import django_xsm.engine"
        targets["exceptions"] = "import django_xsm.exceptions"
        self.import_targets = targets

    def version(self) -> str:
        import django_xsm

        return str(django_xsm.__version__)

    def _machine(self) -> Any:
        from django_xsm.engine import MachineLogic, create_machine

        def inc(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
            ctx["items"] = ctx.get("items", 0) + 1

        return create_machine(
            json.loads(json.dumps(ORDER_CHART)),
            logic=MachineLogic(actions={"inc": inc}),
        )

    def make_engine(self) -> Any:
        instance = self._machine().start()
        send = instance.send

        def send_event(event_type: str, wait: bool = False, **payload: Any) -> Any:
            # django-xsm always returns a receipt; ``wait`` has no meaning here
            return send(event_type, **payload) if payload else send(event_type)

        def close() -> None:
            return None

        return send_event, close
