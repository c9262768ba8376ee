"""django-xsm adapter for the side-by-side harness ``bench/peer/harness.py``.

Usage (from the repository root; ``bench/peer/run.py`` runs the peer and
these adapters in alternating rounds)::

    python bench/peer/harness.py --engine --imports \\
        --adapter bench.xsm_adapter:Adapter --json xsm-engine.json

and for the persisted round trips (``--persisted``, ``rt_count.py``)::

    python bench/peer/harness.py --persisted --start-redis \\
        --adapter bench.xsm_adapter:Adapter --json xsm-persisted.json
    python bench/peer/rt_count.py --start-redis --new-key \\
        --adapter bench.xsm_adapter:Adapter

``make_sender`` builds the store, inbox and log on the client the harness
gives, with one prefix, which is how an application should build them (one
script to open, one to commit).
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
        if _exists("django_xsm.redis"):
            targets["redis"] = "import django_xsm.redis"
        targets["engine"] = "import django_xsm.engine"
        targets["redis-py alone"] = "import redis"
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

    def _setup(self, client: Any, prefix: str, plugins: bool, lock: str) -> Any:
        """(machine, store, plugins, lock strategy) on one client and prefix."""
        from django_xsm.persistence import (
            AuditPlugin,
            IdempotencyPlugin,
            OptimisticLock,
            PessimisticLock,
        )
        from django_xsm.redis import RedisInbox, RedisLog, RedisStore

        plug: list[Any] = []
        if plugins:
            inbox = RedisInbox(client, prefix=prefix)
            plug = [
                IdempotencyPlugin(inbox, principal=lambda e: "tenant-1"),
                AuditPlugin(RedisLog(client, prefix=prefix)),
            ]
        # django-xsm has no lock-free mode: "none" maps to the optimistic
        # fence (still one compare-and-set, no extra round trip).
        strategy = PessimisticLock() if lock == "pessimistic" else OptimisticLock()
        return self._machine(), RedisStore(client, prefix=prefix), plug, strategy

    def make_sender(self, client: Any, prefix: str, plugins: bool, lock: str) -> Any:
        """One ``persisted()`` block with one ``send()`` per call."""
        from django_xsm.persistence import persisted

        machine, store, plug, strategy = self._setup(client, prefix, plugins, lock)

        def send(key: str, event_type: str, **payload: Any) -> Any:
            if not plugins:
                # without an IdempotencyPlugin a key would be an error, not
                # silently ignored; the harness passes one regardless
                payload.pop("idempotency_key", None)
            with persisted(store, key, machine, lock=strategy, plugins=plug) as block:
                return block.send(event_type, **payload)

        return send

    def script_names(self) -> dict[str, str]:
        """sha1 -> name of django-xsm's Lua scripts (``rt_count.py`` names
        the ``EVALSHA`` calls with it)."""
        import hashlib

        from django_xsm.redis import scripts

        return {
            hashlib.sha1(getattr(scripts, name).encode(), usedforsecurity=False).hexdigest(): name
            for name in scripts.__all__
        }

    def snapshot_size(self, client: Any, prefix: str, key: str) -> int:
        from django_xsm.redis import RedisStore

        store = RedisStore(client, prefix=prefix)
        raw = client.hget(store.core.state.layout.snapshot(key), "d")
        return len(raw or b"")


class AdapterKeyAtOpen(Adapter):
    """The same work with the idempotency key passed when the block opens
    (what ``@stateful_view`` does with the request's ``Idempotency-Key``):
    the claim rides in the open script, so a keyed, audited request is two
    round trips with either lock."""

    name = "django-xsm (key at open)"

    def make_sender(self, client: Any, prefix: str, plugins: bool, lock: str) -> Any:
        from django_xsm.persistence import persisted
        from django_xsm.persistence.idempotency import event_fingerprint

        machine, store, plug, strategy = self._setup(client, prefix, plugins, lock)

        def send(key: str, event_type: str, **payload: Any) -> Any:
            idem = payload.pop("idempotency_key", None) if plugins else None
            payload.pop("idempotency_key", None)
            actor = payload.pop("actor", "")
            with persisted(
                store,
                key,
                machine,
                lock=strategy,
                plugins=plug,
                actor=actor,
                idempotency_key=idem,
                fingerprint=event_fingerprint(event_type, payload) if idem else "",
                principal="tenant-1",
            ) as block:
                return block.send(event_type, idempotency_key=idem, **payload)

        return send
