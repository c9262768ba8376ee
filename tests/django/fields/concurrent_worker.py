"""One worker process of the concurrency test: sends ADD events to one row
through its StatechartField, each with an idempotency key; several keys
are shared with the other workers (so each must apply exactly once). A
conflict or an in-flight key is retried with the same key, as a client
retries a 409.

``python -m tests.django.fields.concurrent_worker PK FIRST COUNT`` with the
settings of ``tests.django.commands.live_settings`` (live Redis, the test's
prefix) and ``XSM_TEST_PG_NAME`` naming the test's PostgreSQL database.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    import django
    from django.conf import settings

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.commands.live_settings")
    django.setup()
    settings.DATABASES["postgres"]["NAME"] = os.environ["XSM_TEST_PG_NAME"]

    from django_xsm.exceptions import ConflictError, IdempotencyInFlightError
    from tests.fieldapp.models import Order

    pk, first, count = (int(x) for x in sys.argv[1:4])
    order = Order.objects.using("postgres").get(pk=pk)
    retries = 0
    for n in range(first, first + count):
        while True:  # what a client does on 409: retry with the same key
            try:
                order.status.send("ADD", idempotency_key=f"evt-{n}", actor=f"w{os.getpid()}")
                break
            except (ConflictError, IdempotencyInFlightError):
                retries += 1
    print(f"done retries={retries}", flush=True)


if __name__ == "__main__":
    main()
