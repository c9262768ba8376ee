"""The benchmark's order chart (``../chart.json``) for xstate-statemachine,
and its Redis persistence: ``RedisStore`` + ``IdempotencyPlugin(RedisInbox)``
+ ``AuditPlugin(RedisLog)`` (the peer's "idempotency + audit" set), one
client per worker process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from xstate_statemachine import MachineLogic, create_machine
from xstate_statemachine.contrib.redis import RedisInbox, RedisLog, RedisStore
from xstate_statemachine.persistence import AuditPlugin, IdempotencyPlugin, OptimisticLock

CONFIG: dict[str, Any] = json.loads((Path(__file__).parents[1] / "chart.json").read_text())
PREFIX = "bench"


def record_payment(interp: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["payments"] += 1
    ctx["paid_cents"] += event.payload["amount_cents"]


order = create_machine(CONFIG, logic=MachineLogic(actions={"recordPayment": record_payment}))
client = redis.Redis.from_url(settings.REDIS_URL)
store = RedisStore(client, prefix=PREFIX)
log = RedisLog(client, prefix=PREFIX)
plugins = [
    # the peer refuses "anonymous" as a principal (a placeholder, not an
    # identity): one fixed tenant, as the shared harness uses
    IdempotencyPlugin(RedisInbox(client, prefix=PREFIX), principal=lambda e: "tenant-1"),
    AuditPlugin(log),
]
# the same retry budget as django-xsm's CONFLICT_RETRIES (3)
lock = OptimisticLock(retries=3)
