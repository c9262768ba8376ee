"""The emitting machine of the outbox tests, and an outbox worker process
for their fault tests: ``python -m tests.redis.outbox_worker <role> <redis
url> <prefix> [args]``.

The worker prints one line per milestone (flushed) and then waits for a
line on stdin, so the parent can kill it at an exact point.
"""

from __future__ import annotations

import sys
from typing import Any

import redis

from django_xsm.engine import MachineLogic, create_machine
from django_xsm.persistence import persisted
from django_xsm.redis import RedisOutbox

BUCKETS = 4

CHART: dict[str, Any] = {
    "id": "order",
    "initial": "cart",
    "context": {"paid": 0},
    "states": {
        "cart": {
            "entry": {"type": "xstate.emit", "event": {"type": "order.created"}},
            "on": {
                "PAY": {"target": "paid", "actions": "pay"},
                "PING": {"actions": {"type": "xstate.emit", "event": {"type": "pong"}}},
                "BOOM": {"actions": ["shout", "fail"]},
            },
        },
        "paid": {
            "on": {
                "SHIP": {
                    "target": "shipped",
                    "actions": {"type": "xstate.emit", "event": {"type": "order.shipped"}},
                }
            }
        },
        "shipped": {"type": "final"},
    },
}


def _pay(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    ctx["paid"] = event.data.get("amount", 0)
    instance.emit({"type": "order.paid", "amount": ctx["paid"]})
    instance.emit("order.notified")


def _shout(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    instance.emit({"type": "order.lost"})


def _fail(instance: Any, ctx: dict[str, Any], event: Any, action: Any) -> None:
    raise RuntimeError("warehouse down")


def emit_machine() -> Any:
    """Creating an instance emits ``order.created``; PAY emits
    ``order.paid`` then ``order.notified``; SHIP ``order.shipped``; PING
    ``pong``; BOOM emits ``order.lost`` and then fails."""
    logic = MachineLogic(actions={"pay": _pay, "shout": _shout, "fail": _fail})
    return create_machine(CHART, logic=logic)


def commit(store: Any, key: str, *events: str, **data: Any) -> None:
    """One block on ``key`` sending ``events`` (creating it when absent)."""
    with persisted(store, key, emit_machine()) as inst:
        for event in events:
            inst.send(event, **data)


def say(text: str) -> None:
    print(text, flush=True)


def take_then_hang(url: str, prefix: str, visibility_ms: str) -> None:
    """Take one lease, then hang in the middle of its handler."""
    outbox = RedisOutbox(redis.Redis.from_url(url), prefix=prefix, buckets=BUCKETS)
    leases = outbox.take("doomed", count=1, visibility_timeout_ms=int(visibility_ms))
    say(" ".join(lease.entry.delivery_id for lease in leases) or "-")
    sys.stdin.readline()  # killed here
    say(f"acked {outbox.ack(leases[0])}")


ROLES = {"take_then_hang": take_then_hang}

if __name__ == "__main__":
    ROLES[sys.argv[1]](*sys.argv[2:])
