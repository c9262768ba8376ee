"""Seed and check one stack's orders, inside that stack's virtualenv.

    python ops.py STACK seed FIRST COUNT
    python ops.py STACK verify FIRST COUNT KEYS_OUT

STACK is ``xsm``, ``fsm`` or ``peer`` (run from this directory, with the
stack's environment: ``BENCH_REDIS_URL`` / ``BENCH_PG_DB``). ``seed``
creates orders FIRST..FIRST+COUNT-1 in ``awaiting_payment``. ``verify``
prints one JSON line: the orders' summed ``payments`` counter (the applied
effects), the PAY records of the audit trail and how many of their keys
repeat; the keys themselves (one per PAY record) go to KEYS_OUT.
"""

from __future__ import annotations

import collections
import json
import os
import sys

SETTINGS = {"xsm": "site_xsm.settings", "fsm": "site_fsm.settings", "peer": "site_peer.settings"}


def seed_xsm(ids: range) -> None:
    from django_xsm.registry import machines

    objects = machines["order"].objects
    for i in ids:
        objects.send(f"order:{i}", "CHECKOUT", create=True, actor="seed")


def verify_xsm(ids: range) -> tuple[int, list[str], int]:
    from django_xsm.registry import machines

    objects = machines["order"].objects
    total, keys = 0, []
    for i in ids:
        key = f"order:{i}"
        total += objects.get(key).context["payments"]
        keys += [r.correlation_id for r in objects.history(key) if r.event_type == "PAY"]
    return total, keys, -1


def seed_fsm(ids: range) -> None:
    from site_fsm.models import Order

    Order.objects.bulk_create([Order(id=i, state="awaiting_payment") for i in ids], batch_size=1000)


def verify_fsm(ids: range) -> tuple[int, list[str], int]:
    from django.contrib.contenttypes.models import ContentType
    from django.db.models import Sum
    from django_fsm_log.models import StateLog
    from site_fsm.models import IdempotencyKey, Order

    lo, hi = ids.start, ids.stop - 1
    orders = Order.objects.filter(id__gte=lo, id__lte=hi)
    total = orders.aggregate(s=Sum("payments"))["s"] or 0
    logs = StateLog.objects.filter(
        content_type=ContentType.objects.get_for_model(Order),
        object_id__gte=lo,
        object_id__lte=hi,
        transition="pay",
    )
    keys = list(logs.values_list("description", flat=True))
    stored = IdempotencyKey.objects.filter(order_id__gte=lo, order_id__lte=hi).count()
    return total, keys, stored


def seed_peer(ids: range) -> None:
    from site_peer import machines
    from xstate_statemachine.persistence import persisted

    for i in ids:
        with persisted(machines.store, f"order:{i}", machines.order) as m:
            m.send("CHECKOUT")


def verify_peer(ids: range) -> tuple[int, list[str], int]:
    from site_peer import machines

    total, keys = 0, []
    for i in ids:
        key = f"order:{i}"
        data = json.loads(machines.store.load(key).snapshot)
        total += data["context"]["payments"]
        after = 0
        while True:
            recs = machines.log.read(key, after_seq=after, limit=1000)
            if not recs:
                break
            after = recs[-1].seq
            keys += [
                r.correlation_id
                for r in recs
                if r.event_type == "PAY" and r.disposition == "transition"
            ]
    return total, keys, -1


def main() -> None:
    stack, op, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS[stack]
    import django

    django.setup()
    ids = range(first, first + count)
    if op == "seed":
        globals()[f"seed_{stack}"](ids)
        print(json.dumps({"seeded": count}))
        return
    total, keys, stored = globals()[f"verify_{stack}"](ids)
    counts = collections.Counter(keys)
    with open(sys.argv[5], "w") as fh:
        fh.writelines(f"{k}\n" for k in keys)
    print(
        json.dumps(
            {
                "applied": total,  # the orders' payments counters
                "log_pay_records": len(keys),  # PAY records in the audit trail
                "log_keys_distinct": len(counts),
                "log_keys_repeated": sum(1 for c in counts.values() if c > 1),
                "stored_responses": stored,  # fsm: idempotency rows (-1: n/a)
            }
        )
    )


if __name__ == "__main__":
    main()
