"""Worker processes for the fault tests: ``python -m tests.redis.workers
<role> <redis url> <prefix>``.

Each worker prints one line per milestone (flushed) and then waits for a
line on stdin, so the parent can kill or pause it at an exact point.
"""

from __future__ import annotations

import sys

import redis

from django_xsm.exceptions import XsmError
from django_xsm.persistence import (
    AuditPlugin,
    IdempotencyPlugin,
    PessimisticLock,
    persisted,
)
from django_xsm.redis import RedisInbox, RedisLog, RedisStore
from tests.support import order_machine


def say(text: str) -> None:
    print(text, flush=True)


def claim_then_wait(url: str, prefix: str) -> None:
    """Claim an idempotency key inside a block, then hang before commit."""
    client = redis.Redis.from_url(url)
    store = RedisStore(client, prefix=prefix, lock_ttl_ms=600)
    plugins = [
        IdempotencyPlugin(RedisInbox(client, prefix=prefix), principal=lambda e: "acct"),
        AuditPlugin(RedisLog(client, prefix=prefix)),
    ]
    with persisted(store, "order:1", order_machine(), plugins=plugins) as inst:
        inst.send("ADD", idempotency_key="evt-1", actor="doomed")
        say("claimed")
        sys.stdin.readline()  # killed here
    say("committed")


def lock_then_wait(url: str, prefix: str) -> None:
    """Hold the instance lock (100 ms lease) with a change, wait, commit."""
    client = redis.Redis.from_url(url)
    store = RedisStore(client, prefix=prefix)
    try:
        with persisted(store, "order:1", order_machine(), lock=PessimisticLock(ttl_ms=100)) as inst:
            inst.send("ADD", n=100)
            say("locked")
            sys.stdin.readline()  # paused past the lease here
        say("committed")
    except XsmError as exc:
        say(f"{type(exc).__name__} reason={getattr(exc, 'reason', '')}")


ROLES = {"claim_then_wait": claim_then_wait, "lock_then_wait": lock_then_wait}

if __name__ == "__main__":
    ROLES[sys.argv[1]](sys.argv[2], sys.argv[3])
